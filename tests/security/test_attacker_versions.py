"""Attacker stories of flow versions and lineage: mallory reads the catalog like everyone
(flows.rules), so she may read victor's versions page, but never a secret in it, plain or as
ciphertext; she cannot run his flow again with any version; the lineage she could see names
datasets without credentials."""

from __future__ import annotations

from django.test import Client

from portal.flows import services as flow_services
from portal.flows.versions import services as versions
from portal.keys import services
from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import FlowExecution
from portal.orchestration.services import run_now
from portal.orchestration.state import lineage
from tests.builders.world import SECRET


def browser_of(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def test_mallory_reads_victors_versions_without_any_secret(world):
    versions.record(world.victor_flow, by="victor")
    rotated = services.encrypt_value(world.victor_key.wrapped_key, SECRET + "-2")
    flow = flow_services.update_flow(
        world.victor_flow,
        data={"properties": {**world.victor_flow.properties, "source.conn.password": rotated}},
        by="victor",
    )
    assert [v.number for v in versions.versions_of(flow)] == [2, 1]
    page = browser_of(world.mallory).get("/flows/team-v/orders/versions/?old=1&new=2").content.decode()
    assert "source.conn.password = ENC(…) (changed)" in page
    assert SECRET not in page
    ciphertexts = [v.spec["properties"]["source.conn.password"] for v in versions.versions_of(flow)]
    assert all(text[4:30] not in page for text in ciphertexts)  # not even the ciphertext


def test_mallory_cannot_run_victors_flow_again_with_its_old_or_current_version(world):
    versions.record(world.victor_flow, by="victor")
    execution = run_now(world.victor_flow, user=world.victor)
    process_actions()
    execution.refresh_from_db()
    assert execution.flow_version == 1
    FlowExecution.objects.filter(pk=execution.pk).update(status="COMMITTED")
    url = f"/executions/team-v/orders/{execution.execution_id}/rerun/"
    for version in ("ran", "current"):
        response = browser_of(world.mallory).post(url, {"version": version})
        assert response.status_code == 403, version
    assert FlowExecution.objects.filter(flow=world.victor_flow).count() == 1
    page = (
        browser_of(world.mallory).get(f"/executions/team-v/orders/{execution.execution_id}/").content.decode()
    )
    assert 'id="rerun-form"' not in page  # not offered either


def test_lineage_names_a_database_without_its_user_or_password():
    url = f"jdbc:postgresql://victor:{SECRET}@db.internal:5432/sales?user=victor&password={SECRET}"
    dataset = lineage.jdbc_dataset(url, "public.orders")
    assert SECRET not in dataset.namespace + dataset.name and "victor" not in dataset.namespace + dataset.name
    assert dataset == lineage.Dataset("postgres://db.internal:5432", "sales.public.orders")
