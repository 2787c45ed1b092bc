"""Stories of a files node's server folder: ordinary users read paths relative to the node's
root (the server's layout is staff's to see) on its page, the topology overview, its connection
test and discovery, and a dataset's lineage."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.topology import grants, services
from tests.builders.api import api_client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def landing(tmp_path, owner):
    root = tmp_path / "srv" / "landing"
    (root / "orders").mkdir(parents=True)
    (root / "orders" / "2026-01.csv").write_text("id,amount\n1,9.5\n")
    node = services.create_data_node({"name": "landing", "kind": "files", "properties": {"path": str(root)}})
    grants.set_grants(node, [{"role": "read", "user": owner.username}])
    return root


def signed_in(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def test_a_user_reads_the_node_without_its_server_folder_and_staff_with_it(landing, owner):
    for url in ("/topology/datanodes/landing/", "/topology/"):
        page = signed_in(owner).get(url).content.decode()
        assert str(landing) not in page and "its path is shown to staff" in page
    staff = UserFactory(username="stella", is_staff=True)
    assert str(landing) in signed_in(staff).get("/topology/datanodes/landing/").content.decode()


def test_the_connection_test_and_discovery_say_the_nodes_root_not_its_path(landing, owner):
    browser = signed_in(owner)
    verdict = browser.post("/topology/datanodes/landing/test/").content.decode()
    assert "The node&#x27;s root exists and is readable" in verdict and str(landing) not in verdict
    found = browser.post("/topology/datanodes/landing/discover/").content.decode()
    assert "1 data file(s) under the node&#x27;s root." in found and str(landing) not in found
    assert "orders/2026-01.csv" in found  # paths inside the root, as flows name them
    staff = signed_in(UserFactory(username="stella", is_staff=True))
    assert str(landing) in staff.post("/topology/datanodes/landing/test/").content.decode()


def test_the_api_says_the_nodes_root_too(landing, owner):
    answer = api_client_for(owner).post("/api/datanodes/landing/test", {}, format="json").json()
    assert (
        answer["ok"]
        and answer["message"].startswith("The node's root exists")
        and str(landing) not in str(answer)
    )


def test_a_root_relative_to_the_data_folder_is_not_spelt_out_either(tmp_path, owner, settings):
    """A user's own folder is stored relative to FLOWPORT_DATA_DIR; the messages resolve it."""
    settings.FLOWPORT_DATA_DIR = str(tmp_path / "data")
    root = tmp_path / "data" / "users" / owner.username / "shop"
    (root / "orders").mkdir(parents=True)
    (root / "orders" / "2026-01.csv").write_text("id\n1\n")
    relative = f"users/{owner.username}/shop"
    node = services.create_data_node({"name": "shop", "kind": "files", "properties": {"path": relative}})
    grants.set_grants(node, [{"role": "read", "user": owner.username}])

    browser = signed_in(owner)
    verdict = browser.post("/topology/datanodes/shop/test/").content.decode()
    found = browser.post("/topology/datanodes/shop/discover/").content.decode()
    answer = api_client_for(owner).post("/api/datanodes/shop/test", {}, format="json").json()
    for said in (verdict, found, answer["message"]):
        assert str(tmp_path) not in said
    assert "the node&#x27;s root" in found.lower() and answer["message"].startswith("The node's root")
