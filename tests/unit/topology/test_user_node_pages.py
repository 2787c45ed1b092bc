"""A newcomer makes their own data nodes from the topology pages, with no administrator: the
form offers the kinds the policy allows and an owner, the password box encrypts what is typed,
a mistake is shown at its field; the node's page tells everyone whose it is and who uses it;
only its owners edit or delete it, and deleting one that flows use says which."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from portal.crypto.encrypted import decrypt_properties
from portal.topology import services, sharing
from portal.topology.models import DataNode
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db

SALES_DB = "jdbc:postgresql://127.0.0.1:5432/alice_sales"


@pytest.fixture
def alice(db, data_dir, master_key, settings):
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"
    user = UserFactory(username="alice")
    user.groups.add(Group.objects.create(name="sales-team"))
    return user


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_topology_page_invites_every_user_to_make_a_node(alice):
    html = browser(alice).get("/topology/").content.decode()
    assert 'id="new-data-node" href="/topology/datanodes/new/"' in html
    assert "New executor" not in html and 'id="own-nodes"' in html


def test_the_new_node_form_offers_the_allowed_kinds_an_owner_and_the_users_area(alice):
    html = browser(alice).get("/topology/datanodes/new/").content.decode()
    assert '<option value="jdbc">' in html and '<option value="iceberg">' in html
    assert 'value="kafka"' not in html and 'value="hive"' not in html
    assert '<option value="" selected>Me (alice)</option>' in html
    assert '<option value="sales-team">Group sales-team</option>' in html
    assert 'placeholder="users/alice"' in html  # where their folders go
    assert "Other properties" not in html  # a user-made node holds only its kind's fields
    jdbc = browser(alice).post("/topology/datanodes/new/?part=fields", {"kind": "jdbc"}).content.decode()
    assert 'type="password" name="conn_password"' in jdbc and 'name="conn_user"' in jdbc


def test_without_javascript_the_form_shows_the_fields_of_the_chosen_kind(alice):
    page = browser(alice).post("/topology/datanodes/new/", {"name": "db", "kind": "jdbc", "show_fields": "1"})
    html = page.content.decode()
    assert page.status_code == 200 and "JDBC URL" in html and "Root folder" not in html
    assert "<noscript>" in html and 'name="show_fields"' in html
    assert not DataNode.objects.exists()


def test_a_user_makes_a_database_node_typing_its_password(alice):
    answer = browser(alice).post(
        "/topology/datanodes/new/",
        {
            "name": "sales",
            "kind": "jdbc",
            "conn_url": SALES_DB,
            "conn_user": "alice",
            "conn_password": "typed-s3cret",
        },
    )
    assert answer.status_code == 302 and answer["Location"] == "/topology/datanodes/sales/"
    node = DataNode.objects.get(name="sales")
    assert node.user_made and node.created_by == alice
    assert decrypt_properties(node.properties)["password"] == "typed-s3cret"
    assert "typed-s3cret" not in str(node.properties)
    page = browser(alice).get("/topology/datanodes/sales/").content.decode()
    assert 'id="edit-node"' in page and 'id="grant-form"' in page and "typed-s3cret" not in page


def test_a_group_owned_node_from_the_form(alice):
    browser(alice).post(
        "/topology/datanodes/new/",
        {"name": "team-out", "kind": "files", "owner": "sales-team", "conn_path": "groups/sales-team/out"},
    )
    node = DataNode.objects.get(name="team-out")
    assert list(node.grants.values_list("role", "group__name")) == [("owner", "sales-team")]


def test_a_mistake_is_shown_at_the_field_and_nothing_is_saved(alice):
    page = browser(alice).post(
        "/topology/datanodes/new/",
        {
            "name": "hr",
            "kind": "jdbc",
            "conn_url": "jdbc:postgresql://10.0.0.9:5432/hr",
            "conn_password": "x",
        },
    )
    assert page.status_code == 400
    errors = page.context["form"].errors
    assert "10.0.0.9:5432 is not a database server user-made nodes may reach" in errors["conn_url"][0]
    assert 'value="x"' not in page.content.decode()  # a typed password is not sent back
    folder = browser(alice).post(
        "/topology/datanodes/new/", {"name": "f", "kind": "files", "conn_path": "users/bob"}
    )
    assert "outside your areas" in folder.context["form"].errors["conn_path"][0]
    assert not DataNode.objects.exists()


def test_everyone_sees_whose_a_node_is_and_who_uses_it_but_not_its_password(alice):
    services.create_data_node(
        {"name": "sales", "kind": "jdbc", "properties": {"url": SALES_DB}, "secrets": {"password": "pw"}},
        user=alice,
    )
    FlowConfigFactory(owner=alice, flow_group="alice", flow_name="nightly", source="sales")
    stored = DataNode.objects.get(name="sales").properties["password"]
    oscar = UserFactory(username="oscar")
    page = browser(oscar).get("/topology/datanodes/sales/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="node-owners"><code>alice</code></dd>' in html
    assert '<a href="/flows/alice/nightly/">alice/nightly</a>' in html
    assert 'id="request-access"' in html and 'id="grant-form"' not in html and 'id="edit-node"' not in html
    assert stored not in html and "ENC(…)" in html
    assert 'id="node-history"' not in html  # its history is for those who use or share it


def test_only_its_owners_edit_and_the_edit_keeps_the_stored_password(alice):
    services.create_data_node(
        {"name": "sales", "kind": "jdbc", "properties": {"url": SALES_DB}, "secrets": {"password": "pw"}},
        user=alice,
    )
    before = DataNode.objects.get(name="sales").properties
    oscar = UserFactory(username="oscar")
    assert browser(oscar).get("/topology/datanodes/sales/edit/").status_code == 403
    assert browser(oscar).post("/topology/datanodes/sales/delete/").status_code == 403
    form = browser(alice).get("/topology/datanodes/sales/edit/")
    assert form.status_code == 200 and before["password"] not in form.content.decode()
    saved = browser(alice).post(
        "/topology/datanodes/sales/edit/",
        {"kind": "jdbc", "description": "orders", "conn_url": SALES_DB, "conn_password": ""},
    )
    assert saved.status_code == 302
    node = DataNode.objects.get(name="sales")
    assert node.description == "orders" and node.properties == before


def test_deleting_a_node_flows_use_says_which_and_keeps_it(alice):
    services.create_data_node(
        {"name": "out", "kind": "files", "properties": {"path": "users/alice/out"}}, user=alice
    )
    FlowConfigFactory(
        owner=alice, flow_group="alice", flow_name="copy", source="landing", destinations=["out"]
    )
    confirm = browser(alice).get("/topology/datanodes/out/delete/").content.decode()
    assert 'id="delete-flows">Flows name it: <a href="/flows/alice/copy/">alice/copy</a>' in confirm
    refused = browser(alice).post("/topology/datanodes/out/delete/")
    assert refused.status_code == 409 and "used by flows alice/copy" in refused.content.decode()
    assert DataNode.objects.filter(name="out").exists()


def test_a_node_nobody_uses_is_deleted_by_its_owner(alice):
    services.create_data_node(
        {"name": "out", "kind": "files", "properties": {"path": "users/alice/out"}}, user=alice
    )
    confirm = browser(alice).get("/topology/datanodes/out/delete/").content.decode()
    assert "No flow names it." in confirm
    assert browser(alice).post("/topology/datanodes/out/delete/").status_code == 302
    assert not DataNode.objects.exists()


def test_the_overview_lists_the_users_own_and_shared_nodes_not_everyones(alice):
    bob = UserFactory(username="bob")
    mine = services.create_data_node(
        {"name": "alice-out", "kind": "files", "properties": {"path": "users/alice/out"}}, user=alice
    )
    services.create_data_node(
        {"name": "bob-out", "kind": "files", "properties": {"path": "users/bob/out"}}, user=bob
    )
    sharing.grant(mine, user=alice, role="read", principal={"user": "bob"})
    html = browser(bob).get("/topology/").content.decode()
    assert 'href="/topology/datanodes/alice-out/"' in html and 'href="/topology/datanodes/bob-out/"' in html
    oscar = UserFactory(username="oscar")
    html = browser(oscar).get("/topology/").content.decode()
    assert "alice-out" not in html and "bob-out" not in html
    assert (
        ">alice-out</text>" not in browser(alice).get("/topology/").content.decode()
    )  # not drawn in the graph


def test_staff_set_an_executors_routing_policy_for_users_nodes_on_its_form(staff):
    nodes("landing", "lake")
    executor("ingest", "landing>lake")
    client = browser(staff)
    saved = client.post(
        "/topology/executors/ingest/edit/",
        {
            "technology": "spark-local",
            "spark_master": "local[2]",
            "cost": 10,
            "enabled": "on",
            "user_sources": "JDBC, files",
            "user_destinations": "files",
        },
    )
    assert saved.status_code == 302
    html = client.get("/topology/executors/ingest/").content.decode()
    assert 'id="user-routing">reads user-made jdbc,files sources, writes user-made files destinations' in html
    refused = client.post(
        "/topology/executors/ingest/edit/",
        {"technology": "spark-local", "spark_master": "local[2]", "cost": 10, "user_sources": "kafka"},
    )
    assert refused.status_code == 400
    assert "kafka: not a kind of user-made data node" in refused.context["form"].errors["user_sources"][0]
