"""The data-nodes page ("Data nodes (sources & destinations)"): a user finds the nodes they may
use and, on their own pages, those they hold no grant on — by name, kind, owners and
description, never a connection property — and asks for one from the list."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from portal.topology import catalog, grants, services, sharing
from portal.topology.models import DataNode, DataNodeAccessRequest
from tests.factories import UserFactory

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
        {
            "name": "exports",
            "kind": "files",
            "description": "Nightly order exports",
            "properties": {"path": "users/alice/exports"},
        },
        user=alice,
    )


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def section(html: str, section_id: str) -> str:
    start = html.index(f'id="{section_id}"')
    return html[start : html.index("</section>", start)]


def test_a_node_without_a_grant_is_listed_with_its_owner_and_a_request_button(alice, bob, exports):
    html = browser(bob).get("/topology/datanodes/").content.decode()
    asked_for = section(html, "askable-nodes")
    assert 'href="/topology/datanodes/exports/">exports</a>' in asked_for
    assert "Nightly order exports" in asked_for and "alice" in asked_for and "Files" in asked_for
    assert 'action="/topology/datanodes/exports/request-access/"' in asked_for
    assert "users/alice/exports" not in html  # its path is the owner's business
    assert "exports" not in section(html, "usable-nodes")

    mine = section(browser(alice).get("/topology/datanodes/").content.decode(), "usable-nodes")
    assert 'href="/topology/datanodes/exports/">exports</a>' in mine


def test_asking_from_the_list_comes_back_to_it_and_says_it_waits(alice, bob, exports):
    answer = browser(bob).post(
        "/topology/datanodes/exports/request-access/",
        {"role": "read", "next": "/topology/datanodes/?q=export"},
        follow=True,
    )
    assert answer.redirect_chain == [("/topology/datanodes/?q=export", 302)]
    row = section(answer.content.decode(), "askable-nodes")
    assert "asked to read; waiting" in row and '<option value="write">' in row
    assert '<option value="read">' not in row
    assert DataNodeAccessRequest.objects.get().requested_by == bob


def test_a_next_address_on_another_site_is_ignored(alice, bob, exports):
    answer = browser(bob).post(
        "/topology/datanodes/exports/request-access/", {"role": "read", "next": "https://evil.example/"}
    )
    assert answer["Location"] == "/topology/datanodes/exports/"


def test_staff_may_use_every_node_so_nothing_is_listed_to_ask_for(alice, exports):
    staff = UserFactory(username="sam", is_staff=True)
    html = browser(staff).get("/topology/datanodes/").content.decode()
    assert "None: staff may use every node." in section(html, "askable-nodes")


def test_the_lists_are_paged_and_searched_without_reading_the_catalog(
    alice, bob, django_assert_max_num_queries, settings
):
    settings.USER_NODE_MAX_PER_USER = 40
    for number in range(30):
        services.create_data_node(
            {"name": f"n{number:02}", "kind": "files", "properties": {"path": f"users/alice/n{number:02}"}},
            user=alice,
        )
    first = catalog.page_of(catalog.askable(bob), bob)
    assert [row.node.name for row in first.rows][:2] == ["n00", "n01"] and len(first.rows) == catalog.PER_PAGE
    assert first.has_next and not first.has_previous
    assert first.rows[0].owners == ["alice"]
    second = catalog.page_of(catalog.askable(bob), bob, number=2)
    assert [row.node.name for row in second.rows] == ["n25", "n26", "n27", "n28", "n29"]
    assert not second.has_next
    with django_assert_max_num_queries(3):
        catalog.page_of(catalog.askable(bob), bob, number=1)
    found = catalog.page_of(catalog.askable(bob), bob, query="n1")
    assert [row.node.name for row in found.rows] == [f"n1{digit}" for digit in range(10)]

    html = browser(bob).get("/topology/datanodes/?ask_page=2&q=n").content.decode()
    assert "n29" in html and "n00" not in html
    assert 'href="?q=n&amp;ask_page=1">← Previous</a>' in html


def test_a_page_number_that_is_no_number_is_the_first(alice, bob):
    assert browser(bob).get("/topology/datanodes/?page=x&ask_page=-3").status_code == 200
    assert catalog.page_number("x") == 1 and catalog.page_number("-3") == 1


def test_a_shared_node_moves_to_the_usable_list(alice, bob, exports):
    sharing.grant(exports, user=alice, role="read", principal={"user": "bob"})
    html = browser(bob).get("/topology/datanodes/").content.decode()
    assert "exports" in section(html, "usable-nodes") and "exports" not in section(html, "askable-nodes")


@pytest.mark.parametrize("default_access", ["closed", "open"])
def test_the_lists_agree_with_the_one_access_decision_node_by_node(alice, bob, settings, default_access):
    """Whatever makes a node usable (a grant to the user or their group, an administrator's node
    open by default), the lists split the nodes exactly as `grants.may_use` decides each."""
    settings.DATA_NODE_DEFAULT_ACCESS = default_access
    team = Group.objects.create(name="analysts")
    bob.groups.add(team)
    services.create_data_node({"name": "open-lake", "kind": "files", "properties": {"path": "var/lake"}})
    for name, acl in (
        ("alices-only", [{"role": "owner", "user": "alice"}]),
        ("bob-reads", [{"role": "read", "user": "bob"}]),
        ("team-writes", [{"role": "write", "group": "analysts"}]),
    ):
        services.create_data_node(
            {"name": name, "kind": "files", "properties": {"path": f"var/{name}"}, "acl": acl}
        )
    for name in ("alice-own", "alice-shared"):
        services.create_data_node(
            {"name": name, "kind": "files", "properties": {"path": f"users/alice/{name}"}}, user=alice
        )
    sharing.grant(
        DataNode.objects.get(name="alice-shared"), user=alice, role="read", principal={"user": "bob"}
    )

    usable = {node.name for node in catalog.usable(bob)}
    askable = {node.name for node in catalog.askable(bob)}
    decided = {
        node.name
        for node in DataNode.objects.all()
        if grants.may_use(bob, node.name, "read") or grants.may_use(bob, node.name, "write")
    }
    assert usable == decided and askable == set(DataNode.objects.values_list("name", flat=True)) - decided
    assert ("open-lake" in usable) == (default_access == "open")
    assert {"bob-reads", "team-writes", "alice-shared"} <= usable and {"alices-only", "alice-own"} <= askable
