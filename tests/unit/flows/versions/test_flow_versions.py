"""Stories of flow versions: each save that changes a flow keeps a
version (who, when, what), the versions page shows what changed between two
(secrets masked), an execution records what it compiled against, and an old
execution can run again with the version it ran or with the current one."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from portal.crypto import client
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY
from portal.crypto.master import create_ring_file
from portal.flows import services
from portal.flows.models import FlowVersion
from portal.flows.versions import services as versions
from portal.keys import services as keys
from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import FlowExecution
from portal.topology import services as topology
from tests.factories import UserFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db

DATA = {
    "flow_group": "sales",
    "flow_name": "orders",
    "source": "a",
    "destinations": ["c"],
    "schedule": "0 3 * * *",
    "properties": {"source.files.format": "csv", "my.note": "first"},
}


@pytest.fixture
def flow(owner):
    nodes("a", "b", "c")
    executor("x1", "a>b")
    executor("x2", "b>c")
    return services.create_flow(owner=owner, data=DATA)


@pytest.fixture
def stored_key(owner, settings, tmp_path):
    """The owner's customer key, wrapped by a master key of this test's own."""
    create_ring_file(tmp_path / "master-key")
    settings.FLOWPORT_MASTER_KEY_FILE, settings.FLOWPORT_MASTER_KEY = str(tmp_path / "master-key"), ""
    key = client.encode_key(client.generate_key())
    return keys.wrap_customer_key(user=owner, key=key, label="main").customer_key


def sealed(stored_key, plaintext: str) -> dict[str, str]:
    return {
        "source.conn.password": keys.encrypt_value(stored_key.wrapped_key, plaintext),
        WRAPPED_KEY_PROPERTY: stored_key.wrapped_key,
    }


def browser_of(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def edit(flow, by: str, **properties):
    return services.update_flow(flow, data={"properties": {**flow.properties, **properties}}, by=by)


def test_each_changing_save_keeps_a_version_and_the_page_shows_the_diff_with_secrets_masked(
    flow, owner, stored_key
):
    assert [(v.number, v.created_by) for v in versions.versions_of(flow)] == [(1, owner.username)]
    flow = edit(flow, owner.username, **sealed(stored_key, "hunter2"))
    flow = edit(flow, owner.username, **{"my.note": "second", **sealed(stored_key, "swordfish")})
    flow = services.update_flow(flow, data={"description": flow.description}, by=owner.username)  # no change
    assert [v.number for v in versions.versions_of(flow)] == [3, 2, 1]  # the unchanged save made none
    assert FlowVersion.objects.get(flow=flow, number=1).spec["properties"]["my.note"] == "first"

    page = browser_of(owner).get("/flows/sales/orders/versions/")  # the latest against the one before
    assert page.status_code == 200
    text = page.content.decode()
    assert "-properties.my.note = first" in text and "+properties.my.note = second" in text
    assert "hunter2" not in text and "swordfish" not in text and "ENC(" not in text.replace("ENC(…)", "")
    assert "+properties.source.conn.password = ENC(…) (changed)" in text
    first = browser_of(owner).get("/flows/sales/orders/versions/?old=1&new=2").content.decode()
    diff = first[first.find('<pre class="diff">') :]
    assert (
        "+properties.source.conn.password = ENC(…)" in diff and "(changed)" not in diff
    )  # added, not changed
    assert 'id="versions-link"' in browser_of(owner).get("/flows/sales/orders/").content.decode()


def test_comparing_a_version_with_itself_or_one_that_does_not_exist(flow, owner):
    browser = browser_of(owner)
    same = browser.get("/flows/sales/orders/versions/?old=1&new=1")
    assert same.status_code == 200 and "No differences." in same.content.decode()
    missing = browser.get("/flows/sales/orders/versions/?old=7")
    assert missing.status_code == 400 and "old: the flow has no version 7." in missing.content.decode()
    typed = browser.get("/flows/sales/orders/versions/?new=latest")
    assert typed.status_code == 400 and "new: a version number" in typed.content.decode()


def test_versions_follow_the_flow_s_own_visibility(flow, owner):
    """Every signed-in user sees the catalog (flows.rules; secrets are ciphertext), so any of
    them reads its versions; a signed-out visitor goes to the login page, an unknown flow is a 404."""
    colleague = UserFactory(username="colleague")
    assert browser_of(colleague).get("/flows/sales/orders/versions/").status_code == 200
    assert Client().get("/flows/sales/orders/versions/").status_code == 302
    assert browser_of(colleague).get("/flows/sales/nothing/versions/").status_code == 404


def test_a_script_reads_the_versions_and_a_diff_through_the_api_with_secrets_masked(flow, owner, stored_key):
    flow = edit(flow, owner.username, **sealed(stored_key, "hunter2"))
    flow = edit(flow, owner.username, **{"my.note": "second", **sealed(stored_key, "swordfish")})
    api = browser_of(owner)
    listed = api.get("/api/flowconfigs/sales/orders/versions").json()
    assert [(item["number"], item["createdBy"]) for item in listed["versions"]] == [
        (3, owner.username),
        (2, owner.username),
        (1, owner.username),
    ]
    latest = api.get("/api/flowconfigs/sales/orders/versions/3")
    assert latest.status_code == 200
    body = latest.json()
    assert body["against"] == 2 and body["spec"]["properties"]["my.note"] == "second"
    assert "-properties.my.note = first" in body["diff"] and "+properties.my.note = second" in body["diff"]
    assert "+properties.source.conn.password = ENC(…) (changed)" in body["diff"]
    assert body["spec"]["properties"]["source.conn.password"] == "ENC(…)"
    assert "hunter2" not in latest.content.decode() and "swordfish" not in latest.content.decode()
    assert "ENC(" not in latest.content.decode().replace("ENC(…)", "")
    against_first = api.get("/api/flowconfigs/sales/orders/versions/3?against=1").json()
    assert (
        against_first["against"] == 1 and "+properties.source.conn.password = ENC(…)" in against_first["diff"]
    )
    first = api.get("/api/flowconfigs/sales/orders/versions/1").json()
    assert first["against"] is None and first["diff"] == []


def test_the_versions_api_says_what_it_cannot_find_or_read(flow, owner):
    api = browser_of(owner)
    missing = api.get("/api/flowconfigs/sales/orders/versions/7")
    assert missing.status_code == 404 and "no version 7" in missing.json()["detail"]
    assert api.get("/api/flowconfigs/sales/orders/versions/" + "9" * 30).status_code == 404
    typed = api.get("/api/flowconfigs/sales/orders/versions/1?against=latest")
    assert typed.status_code == 400 and "against" in typed.json()
    unknown = api.get("/api/flowconfigs/sales/orders/versions/1?against=9")
    assert unknown.status_code == 400 and "no version 9" in str(unknown.json()["against"])
    assert api.get("/api/flowconfigs/sales/nothing/versions").status_code == 404
    assert Client().get("/api/flowconfigs/sales/orders/versions").status_code in (401, 403)


def launched(execution: FlowExecution) -> FlowExecution:
    process_actions()
    execution.refresh_from_db()
    return execution


def note_of(execution: FlowExecution) -> str:
    return execution.dag["jobs"][0]["properties"]["my.note"]


def test_an_old_execution_runs_again_with_the_version_it_ran_or_the_current_one(flow, owner):
    from portal.orchestration import services as orchestration

    first = launched(orchestration.run_now(flow, user=owner))
    assert (first.flow_version, note_of(first)) == (1, "first")
    assert first.topology_revision == topology.current_revision_number()
    assert re.fullmatch(r"[0-9a-f]{64}", first.plan_hash)
    FlowExecution.objects.filter(pk=first.pk).update(status="COMMITTED")
    edit(flow, owner.username, **{"my.note": "second"})

    browser = browser_of(owner)
    url = f"/executions/sales/orders/{first.execution_id}/"
    page = browser.get(url).content.decode()
    assert 'data-test="flow-version"' in page and ">v1</a>" in page and first.plan_hash[:12] in page
    assert "with the version it ran (v1)" in page and "with the current version (v2)" in page

    browser.post(url + "rerun/", {"version": "ran"})
    old = launched(FlowExecution.objects.exclude(pk=first.pk).get())
    assert (old.pinned_version, old.flow_version, note_of(old)) == (1, 1, "first")
    assert old.plan_hash == first.plan_hash  # the same plan, compiled again
    told = browser.get(f"/api/flowexecutions/{old.execution_id}").json()
    assert (told["flowVersion"], told["pinnedVersion"], told["planHash"]) == (1, 1, first.plan_hash)
    assert told["topologyRevision"] == first.topology_revision and told["packVersions"] == {}
    FlowExecution.objects.filter(pk=old.pk).update(status="COMMITTED")

    browser.post(url + "rerun/", {"version": "current"})
    new = launched(FlowExecution.objects.exclude(pk__in=[first.pk, old.pk]).get())
    assert (new.pinned_version, new.flow_version, note_of(new)) == (None, 2, "second")
    assert new.plan_hash != first.plan_hash
    assert (
        "re-run with the version an earlier execution ran"
        in browser.get(f"/executions/sales/orders/{old.execution_id}/").content.decode()
    )


def test_a_re_run_asked_for_no_known_version_is_refused_with_the_reason(flow, owner):
    from portal.orchestration import services as orchestration

    first = launched(orchestration.run_now(flow, user=owner))
    response = browser_of(owner).post(
        f"/executions/sales/orders/{first.execution_id}/rerun/", {"version": "yesterday"}, follow=True
    )
    assert response.status_code == 200 and "Choose &#x27;ran&#x27;" in response.content.decode()
    assert FlowExecution.objects.count() == 1


def test_a_diff_names_the_fields_as_a_person_reads_them(flow, owner):
    flow = services.update_flow(
        flow, data={"schedule": "0 3 * * *", "schedule_given": "0 0 3 * * ?", "run_immediately": True}, by="x"
    )
    body = browser_of(owner).get("/api/flowconfigs/sales/orders/versions/2").json()
    changed = [line for line in body["diff"] if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert '+schedule as written = "0 0 3 * * ?"' in changed
    assert "+run immediately = true" in changed
    assert not any("schedule_given" in line or "run_immediately" in line for line in body["diff"])
