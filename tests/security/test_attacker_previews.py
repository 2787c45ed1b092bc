"""Where the data went, and its first rows: an attacker who holds every grant a real tenant has
(an account of her own, write and read grants on the shared nodes, a flow of her own into them,
a token for the API) previews only her own flow's data. She cannot open another tenant's
preview, cannot steer her own preview out of her flow's folder (a crafted URL, a task state
naming another folder, a link planted among her files, a table that is not her flow's), and
never reads the server's absolute paths (page, API, preview, refusals)."""

from __future__ import annotations

import os

import pytest
from django.test import Client

from portal.orchestration.models import JobExecution
from portal.topology import grants, services
from portal.topology.models import DestinationTable
from tests.builders.api import api_client_for
from tests.deliveries import files_delivery, files_node, jdbc_delivery
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def data_dir(tmp_path, settings):
    settings.FLOWPORT_DATA_DIR = str(tmp_path / "data")
    return tmp_path / "data"


@pytest.fixture
def tenants(data_dir):
    victor, mallory = UserFactory(username="victor"), UserFactory(username="mallory")
    lake = files_node(data_dir)
    grants.set_grants(
        lake,
        [
            {"role": "write", "user": "victor"},
            {"role": "write", "user": "mallory"},
            {"role": "read", "user": "victor"},
            {"role": "read", "user": "mallory"},
        ],
    )
    victims = files_delivery(
        data_dir,
        victor,
        node=lake,
        group="team-v",
        name="orders",
        columns={"card": ["4111-1111-1111-1111"], "owner": ["victor's customer"]},
        rows=1,
        files=1,
    )
    mine = files_delivery(
        data_dir, mallory, node=lake, group="mal", name="grab", execution_id=1_700_000_000_001
    )
    return victor, mallory, victims, mine


def _browser(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def test_she_cannot_preview_another_tenants_dataset(tenants):
    _, mallory, victims, _ = tenants
    browser = _browser(mallory)

    response = browser.get(victims.preview())

    assert response.status_code in (403, 404)
    assert b"4111" not in response.content and b"victor&#x27;s customer" not in response.content
    page = browser.get(victims.page).content.decode()
    assert victims.preview() not in page  # no link to rows she may not read


def test_a_crafted_address_reaches_nothing(tenants):
    _, mallory, victims, mine = tenants
    browser = _browser(mallory)
    job = mine.job.job_name
    for address in (
        f"{mine.page}jobs/{job}/outputs/..%2F..%2Fteam-v/",
        f"{mine.page}jobs/{job}/outputs/-1/",
        f"{mine.page}jobs/{job}/outputs/1/",
        f"{mine.page}jobs/..%2F..%2Fteam-v%2Forders/outputs/0/",
        f"{mine.page}jobs/{victims.job.job_name}/outputs/0/",  # victor's job under her execution
    ):
        response = browser.get(address)
        assert response.status_code == 404, address
        assert b"4111" not in response.content


def test_a_task_state_naming_another_folder_publishes_nothing_to_preview(tenants):
    _, mallory, _, mine = tenants
    states = mine.job.task_states
    states[0]["dataset_urn"] = "../../team-v/orders/orders"  # as a tampered worker message might say
    JobExecution.objects.filter(pk=mine.job.pk).update(task_states=states)
    browser = _browser(mallory)

    assert "Where the data went" not in browser.get(mine.page).content.decode()
    assert browser.get(mine.preview()).status_code == 404

    states[0]["dataset_urn"] = "orders"
    states[0]["branches"][0]["final_dir"] = str(mine.folder.parents[2] / "team-v" / "orders")
    JobExecution.objects.filter(pk=mine.job.pk).update(task_states=states)
    assert browser.get(mine.preview()).status_code == 404


def test_a_link_planted_among_her_files_is_refused(tenants, tmp_path):
    _, mallory, victims, mine = tenants
    secret = tmp_path / "master-key"
    secret.write_text("the portal's master key")
    for part, target in zip(
        sorted(mine.folder.iterdir()), [next(victims.folder.iterdir()), secret], strict=True
    ):
        part.unlink()
        part.symlink_to(target)  # one into victor's folder of the same node, one out of the node
    browser = _browser(mallory)

    response = browser.get(mine.preview())

    assert response.status_code == 404
    body = response.content.decode()
    assert "Refused" in body and "4111" not in body and "master key" not in body
    assert str(tmp_path) not in body


def test_she_never_reads_an_absolute_server_path(tenants, data_dir):
    _, mallory, victims, mine = tenants
    browser = _browser(mallory)
    api = api_client_for(mallory)
    for delivery in (mine, victims):
        e = delivery.execution
        seen = [
            browser.get(delivery.page).content.decode(),
            api.get(
                f"/api/flowexecutions/{e.execution_id}?flowGroup={e.flow_group}&flowName={e.flow_name}"
            ).content.decode(),
        ]
        assert all(str(data_dir) not in text and os.path.realpath(data_dir) not in text for text in seen)
    preview = browser.get(mine.preview()).content.decode()
    assert "folder <code>mal/grab/orders</code>" in preview and str(data_dir) not in preview


def test_a_table_that_is_not_her_flows_is_not_read(tenants):
    victor, mallory, _, _ = tenants
    shop = services.create_data_node(
        {"name": "shop", "kind": "jdbc", "properties": {"url": "jdbc:postgresql://127.0.0.1:1/shop"}}
    )
    jdbc_delivery(shop, victor, group="team-v", name="orders-db", table="public.cards")
    # Her flow's spec names victor's table (as a flow saved before the tables had owners could).
    mine = jdbc_delivery(
        shop, mallory, group="mal", name="cards", table="public.cards", execution_id=1_700_000_100_001
    )
    assert DestinationTable.objects.get(node=shop, name="public.cards").owner == victor

    response = _browser(mallory).get(mine.preview())

    assert response.status_code == 404
    assert "is not the flow" in response.content.decode()
