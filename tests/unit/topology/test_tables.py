"""Whose a table of a shared destination is (portal.topology.tables)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from portal.topology import services, tables
from portal.topology.models import DestinationTable
from tests.factories import UserFactory


@pytest.fixture
def shared(db):
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    acl = [{"role": "owner", "user": "alice"}, {"role": "write", "user": "bob"}]
    node = services.create_data_node(
        {
            "name": "shared",
            "kind": "jdbc",
            "properties": {"url": "jdbc:postgresql://127.0.0.1:5432/x"},
            "acl": acl,
        }
    )
    return node, alice, bob


def test_a_new_table_is_its_first_creators_and_an_old_one_the_node_owners(shared):
    node, alice, bob = shared
    assert tables.claim(bob, node, "public.bobs", exists=False, flow="b/f") is None
    assert "belongs to user 'bob'" in tables.claim(alice, node, "public.bobs", exists=True, flow="a/f")
    assert tables.claim(alice, node, "public.old", exists=True, flow="a/f") is None
    assert "belongs to the node's owners" in tables.claim(bob, node, "public.old", exists=True, flow="b/f")
    assert not DestinationTable.objects.filter(name="public.old").exists()
    tables.assign(node, "public.old", bob)
    assert tables.claim(bob, node, "public.old", exists=True, flow="b/f") is None


def test_the_names_a_flow_gives_at_save_are_the_names_the_run_records():
    pg = {"flowport.hop.destination.url": "jdbc:postgresql://h:5432/shop"}
    my = {"flowport.hop.destination.url": "jdbc:mariadb://h:3306/shop"}
    assert tables.named_table("jdbc", {**pg, "writer.jdbc.table": "orders"}, "g") == "public.orders"
    assert tables.named_table("jdbc", {**pg, "writer.jdbc.table": '"s"."Orders"'}, "g") == "s.Orders"
    assert tables.named_table("jdbc", {**my, "writer.jdbc.table": "orders"}, "g") == "shop.orders"
    assert tables.named_table("jdbc", {**pg, "writer.jdbc.table": "t_{table}"}, "g") is None
    assert tables.named_table("iceberg", {"writer.iceberg.table": "orders"}, "g") == "g.orders"


def test_two_flows_creating_one_table_at_once_leave_one_owner(transactional_db):
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    acl = [{"role": "write", "user": "alice"}, {"role": "write", "user": "bob"}]
    node = services.create_data_node(
        {
            "name": "race",
            "kind": "jdbc",
            "properties": {"url": "jdbc:postgresql://127.0.0.1:5432/x"},
            "acl": acl,
        }
    )
    start, answers = threading.Barrier(2), {}

    def claim(user) -> None:
        start.wait()
        try:
            answers[user.username] = tables.claim(user, node, "public.t", exists=False, flow="g/f")
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(u,)) for u in (alice, bob)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    owner = DestinationTable.objects.get(node=node, name="public.t").owner.username
    assert answers[owner] is None
    loser = "bob" if owner == "alice" else "alice"
    assert f"belongs to user '{owner}'" in answers[loser]


def test_a_mariadb_url_names_its_database_as_the_driver_reads_it():
    """Parameters after ``;`` or ``?`` are not the database; a URL naming none leaves the run to ask."""

    def named(url: str) -> str | None:
        props = {"flowport.hop.destination.url": url, "writer.jdbc.table": "orders"}
        return tables.named_table("jdbc", props, "g")

    assert named("jdbc:mariadb://db/shop;sessionVariables=a=b") == "shop.orders"
    assert named("jdbc:mysql://db:3306/shop?useSSL=false") == "shop.orders"
    assert named("jdbc:mysql://db:3306/") is None
    assert named("jdbc:sqlite:/data/shop.db") == "orders"
