"""Sharing a data node, as a template pack is shared: its owners grant and revoke read and
write to users and groups, others ask for access and the owners answer — on the node's page
and through the API — and every change is audited (who, for whom, when, with a diff)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from portal.flows import refresh
from portal.flows import services as flow_services
from portal.flows.models import FlowConfig
from portal.topology import grants, services, sharing
from portal.topology.models import DataNode, DataNodeAccessRequest, DataNodeAuditEvent
from tests.builders.api import api_client_for
from tests.factories import UserFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(db, data_dir, master_key, settings):
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"
    return UserFactory(username="alice")


@pytest.fixture
def bob(db):
    return UserFactory(username="bob")


@pytest.fixture
def exports(alice):
    return services.create_data_node(
        {"name": "exports", "kind": "files", "properties": {"path": "users/alice/exports"}}, user=alice
    )


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def events(node_name: str) -> list[tuple[str, str, str]]:
    return [
        (event.action, event.actor.username, event.summary)
        for event in DataNodeAuditEvent.objects.filter(node_name=node_name).order_by("at", "id")
    ]


def test_the_owner_grants_and_revokes_from_the_page_and_each_change_is_audited(alice, bob, exports):
    page = browser(alice)
    assert (
        page.post(
            "/topology/datanodes/exports/grants/",
            {"role": "read", "principal_kind": "user", "principal": "bob"},
        ).status_code
        == 302
    )
    assert grants.may_use(bob, "exports", "read") and not grants.may_use(bob, "exports", "write")
    team = Group.objects.create(name="analysts")
    page.post(
        "/topology/datanodes/exports/grants/",
        {"role": "write", "principal_kind": "group", "principal": "analysts"},
    )
    html = page.get("/topology/datanodes/exports/").content.decode()
    assert "user <code>bob</code>" in html and "group <code>analysts</code>" in html
    grant = exports.grants.get(role="read")
    assert page.post(f"/topology/datanodes/exports/grants/{grant.pk}/revoke/").status_code == 302
    assert not grants.may_use(bob, "exports", "read")
    assert events("exports")[1:] == [
        ("grants", "alice", "read granted to user:bob"),
        ("grants", "alice", "write granted to group:analysts"),
        ("grants", "alice", "read revoked from user:bob"),
    ]
    first = (
        DataNodeAuditEvent.objects.filter(node_name="exports", action="grants").order_by("at", "id").first()
    )
    assert first is not None and "+read user:bob" in first.diff and first.on_behalf_of is None
    analyst = UserFactory(username="ana")
    analyst.groups.add(team)
    assert grants.may_use(analyst, "exports", "write")


def test_nobody_but_the_owners_and_staff_changes_who_uses_a_node(alice, bob, exports, staff):
    refused = browser(bob).post(
        "/topology/datanodes/exports/grants/", {"role": "read", "principal_kind": "user", "principal": "bob"}
    )
    assert refused.status_code == 403
    assert not grants.may_use(bob, "exports", "read")
    answer = browser(staff).post(
        "/topology/datanodes/exports/grants/", {"role": "read", "principal_kind": "user", "principal": "bob"}
    )
    assert answer.status_code == 302 and grants.may_use(bob, "exports", "read")


def test_a_mistake_in_a_grant_is_said_on_the_page(alice, exports):
    page = browser(alice)
    answer = page.post(
        "/topology/datanodes/exports/grants/",
        {"role": "read", "principal_kind": "user", "principal": "nobody"},
        follow=True,
    )
    assert "no user named &#x27;nobody&#x27;." in answer.content.decode()
    owner = page.post(
        "/topology/datanodes/exports/grants/",
        {"role": "owner", "principal_kind": "user", "principal": "alice"},
        follow=True,
    )
    assert "Grant read or write, not &#x27;owner&#x27;." in owner.content.decode()


def test_a_user_asks_for_access_and_the_owner_grants_it_on_the_page(alice, bob, exports):
    page = browser(bob).get("/topology/datanodes/exports/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="node-owners"><code>alice</code>' in html and 'id="request-access"' in html
    asked = browser(bob).post(
        "/topology/datanodes/exports/request-access/",
        {"role": "read", "message": "for the report"},
        follow=True,
    )
    assert "its owners will see it on their dashboard and this page" in asked.content.decode()
    assert "You asked to read" in asked.content.decode()
    again = browser(bob).post("/topology/datanodes/exports/request-access/", {"role": "read"}, follow=True)
    assert "You already asked to read data node exports" in again.content.decode()
    owners_page = browser(alice).get("/topology/datanodes/exports/").content.decode()
    assert "<code>bob</code> asks to read: “for the report”" in owners_page
    request = DataNodeAccessRequest.objects.get()
    answered = browser(alice).post(
        f"/topology/datanodes/exports/access-requests/{request.pk}/", {"decision": "grant"}
    )
    assert answered.status_code == 302 and grants.may_use(bob, "exports", "read")
    request.refresh_from_db()
    assert (request.granted, request.decided_by) == (True, alice)
    assert [action for action, _who, _what in events("exports")] == ["create", "request", "grants", "answer"]
    assert (
        browser(bob)
        .post(f"/topology/datanodes/exports/access-requests/{request.pk}/", {"decision": "grant"})
        .status_code
        == 403
    )


def test_an_owner_declines_and_the_user_may_ask_again(alice, bob, exports):
    asked = sharing.request_access(exports, user=bob, role="write")
    sharing.decide(exports, asked.pk, user=alice, grant_it=False)
    assert not grants.may_use(bob, "exports", "write")
    assert events("exports")[-1] == ("answer", "alice", "declined bob's request to write")
    sharing.request_access(exports, user=bob, role="write")  # a new request, the old one answered


def test_the_api_asks_answers_lists_and_shows_the_history(alice, bob, exports):
    bob_api, alice_api = api_client_for(bob), api_client_for(alice)
    made = bob_api.post(
        "/api/datanodes/exports/access-requests", {"role": "write", "message": "exports"}, format="json"
    )
    assert made.status_code == 201 and made.json()["requestedBy"] == "bob"
    assert [r["role"] for r in bob_api.get("/api/datanodes/exports/access-requests").json()] == ["write"]
    assert bob_api.get("/api/datanodes/exports/history").status_code == 403  # not granted yet
    request_id = made.json()["id"]
    assert (
        bob_api.post(
            f"/api/datanodes/exports/access-requests/{request_id}", {"decision": "grant"}, format="json"
        ).status_code
        == 403
    )
    answer = alice_api.post(
        f"/api/datanodes/exports/access-requests/{request_id}", {"decision": "grant"}, format="json"
    )
    assert answer.status_code == 200 and answer.json()["granted"] is True
    assert alice_api.get("/api/datanodes/exports/access-requests").json() == []  # nothing open
    history = bob_api.get("/api/datanodes/exports/history").json()
    assert [event["action"] for event in history] == ["answer", "grants", "request", "create"]
    assert history[1]["actor"] == "alice" and "+write user:bob" in history[1]["diff"]


def test_the_owner_replaces_the_whole_list_through_the_api_and_it_is_audited(alice, bob, exports):
    acl = [{"role": "owner", "user": "alice"}, {"role": "read", "user": "bob"}]
    answer = api_client_for(alice).patch("/api/datanodes/exports", {"acl": acl}, format="json")
    assert answer.status_code == 200 and answer.json()["acl"] == acl
    assert events("exports")[-1] == ("grants", "alice", "grants changed")


def test_the_flow_forms_hint_names_the_owners_and_links_the_node_page(alice, bob, exports):
    nodes("landing", "lake")
    grants.set_grants(DataNode.objects.get(name="lake"), [{"role": "write", "user": "bob"}])
    executor("ingest", "landing>lake", user_sources="files")
    reason = grants.NodeAccess(bob).refusal("exports", "read")
    assert reason == (
        "the flow's owner 'bob' may not read from data node 'exports' (ask its owners for a read grant: alice; "
        "Request access on /topology/datanodes/exports/)"
    )
    page = browser(bob).post(
        "/flows/new/",
        {
            "flow_group": "bob",
            "flow_name": "copy",
            "source": "exports",
            "destinations": ["lake"],
            "schedule": "",
        },
    )
    assert page.status_code == 400
    html = page.content.decode()
    assert (
        "ask its owners for a read grant: alice; Request access on "
        '<a href="/topology/datanodes/exports/">/topology/datanodes/exports/</a>)'
    ) in html
    assert not FlowConfig.objects.exists()


def test_a_revoked_grant_fails_the_flows_over_the_node_and_their_page_links_it(alice, bob, exports):
    nodes("landing", "lake")
    executor("ingest", "landing>lake", user_sources="files", user_destinations="files")
    services.create_data_node(
        {"name": "bob-out", "kind": "files", "properties": {"path": "users/bob/out"}}, user=bob
    )
    sharing.grant(exports, user=alice, role="read", principal={"user": "bob"})
    flow = flow_services.create_flow(
        owner=bob,
        data={
            "flow_group": "bob",
            "flow_name": "copy",
            "source": "exports",
            "destinations": ["bob-out"],
            "properties": {"source.files.format": "csv"},
        },
    )
    flow.refresh_from_db()
    assert flow.compilation_status == "COMPILED", flow.compilation_message
    sharing.revoke(exports, exports.grants.get(role="read").pk, user=alice)
    refresh.drain()
    flow.refresh_from_db()
    assert flow.compilation_status == "FAILED"
    html = browser(bob).get("/flows/bob/copy/").content.decode()
    assert 'Request access on <a href="/topology/datanodes/exports/">/topology/datanodes/exports/</a>' in html
