"""Owners hear of access requests: an open request for a data node waits on the dashboard of its
owners (and of staff, for an administrator's node), with Approve and Deny that answer it through
the node's own audited flow and come back to the dashboard; nobody else sees it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from portal.topology import grants, services, sharing
from portal.topology.models import DataNodeAuditEvent
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _closed(settings):
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def waiting(user) -> str:
    html = browser(user).get("/monitoring/").content.decode()
    if 'id="access-requests"' not in html:
        return ""
    start = html.index('id="access-requests"')
    return html[start : html.index("</section>", start)]


def test_the_owner_approves_a_request_from_the_dashboard(owner, outsider):
    shop = services.create_data_node(
        {"name": "shop", "kind": "files", "properties": {"path": "users/olivia/shop"}}, user=owner
    )
    asked = sharing.request_access(shop, user=outsider, role="read", message="for the weekly report")
    card = waiting(owner)
    assert "<code>oscar</code> asks to read" in card and "for the weekly report" in card
    assert f'action="/topology/datanodes/shop/access-requests/{asked.pk}/"' in card
    assert 'name="next" value="/monitoring/"' in card
    assert waiting(outsider) == ""

    answer = browser(owner).post(
        f"/topology/datanodes/shop/access-requests/{asked.pk}/", {"decision": "grant", "next": "/monitoring/"}
    )
    assert answer.status_code == 302 and answer["Location"] == "/monitoring/"
    assert grants.may_use(outsider, "shop", "read")
    assert waiting(owner) == ""
    assert DataNodeAuditEvent.objects.filter(node_name="shop", action="answer").get().summary == (
        "granted oscar's request to read"
    )


def test_a_denied_request_grants_nothing_and_leaves_the_card(owner, outsider):
    shop = services.create_data_node(
        {"name": "shop", "kind": "files", "properties": {"path": "users/olivia/shop"}}, user=owner
    )
    asked = sharing.request_access(shop, user=outsider, role="write")
    browser(owner).post(
        f"/topology/datanodes/shop/access-requests/{asked.pk}/",
        {"decision": "decline", "next": "/monitoring/"},
    )
    assert not grants.may_use(outsider, "shop", "write") and waiting(owner) == ""


def test_staff_answer_for_the_administrators_nodes(owner, outsider, staff):
    lake = services.create_data_node({"name": "lake", "kind": "files", "properties": {"path": "var/lake"}})
    sharing.request_access(lake, user=outsider, role="read")
    assert "asks to read" in waiting(staff) and 'href="/topology/datanodes/lake/">lake</a>' in waiting(staff)
    assert waiting(owner) == ""


def test_a_group_owner_sees_them_and_a_long_queue_is_counted(owner):
    team = Group.objects.create(name="sales")
    owner.groups.add(team)
    node = services.create_data_node(
        {
            "name": "orders",
            "kind": "files",
            "properties": {"path": "var/orders"},
            "acl": [{"role": "owner", "group": "sales"}],
        }
    )
    for number in range(22):
        sharing.request_access(node, user=UserFactory(username=f"asker{number}"), role="read")
    shown, total = sharing.awaiting_answer(owner)
    assert (len(shown), total) == (20, 22) and shown[0].requested_by.username == "asker0"
    assert "and 2 more" in waiting(owner)
