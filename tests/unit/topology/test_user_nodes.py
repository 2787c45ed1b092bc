"""A signed-in user makes data nodes of their own through the API, within the administrators'
policy: their database, their folder, their Iceberg tables. They own them (or their group does),
the password they type is stored ENC(...) under the owner's customer key, only owners and staff
change or delete them, and a node flows use is not deleted behind their back."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from portal.crypto import client
from portal.crypto.encrypted import decrypt_properties
from portal.keys.models import CustomerKey
from portal.topology import policy, services
from portal.topology.models import DataNode, DataNodeAuditEvent, DataNodeGrant, NodeArea
from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory, UserFactory

pytestmark = pytest.mark.django_db

SALES_DB = "jdbc:postgresql://127.0.0.1:5432/alice_sales"


@pytest.fixture
def alice(db):
    return UserFactory(username="alice")


@pytest.fixture
def bob(db):
    return UserFactory(username="bob")


@pytest.fixture
def alice_api(alice, master_key, data_dir):
    return api_client_for(alice)


def make_node(api, name="sales", **body):
    body.setdefault("kind", "jdbc")
    if body["kind"] == "jdbc":
        body.setdefault("properties", {"url": SALES_DB, "user": "alice"})
    return api.post("/api/datanodes", {"name": name, **body}, format="json")


def test_a_new_user_makes_a_database_node_and_owns_it(alice, alice_api):
    revision = services.current_revision_number()
    made = make_node(alice_api, secrets={"password": "s3cret"}, description="My sales database")
    assert made.status_code == 201, made.content
    answer = made.json()
    assert (answer["userMade"], answer["createdBy"], answer["owners"]) == (True, "alice", ["alice"])
    assert answer["acl"] == [{"role": "owner", "user": "alice"}]
    assert "secrets" not in answer and "s3cret" not in made.content.decode()
    node = DataNode.objects.get(name="sales")
    stored = node.properties
    assert stored["password"].startswith("ENC(") and stored["user"] == "alice"
    key = CustomerKey.objects.get(owner_user=alice)  # alice had none: one was made for her
    assert stored["encrypt.wrapped.key"] == key.wrapped_key
    assert client.owner_of(stored["password"]) == f"user:{alice.pk}"
    assert decrypt_properties(stored)["password"] == "s3cret"
    assert answer["properties"]["password"] == stored["password"]  # its owner sees it whole
    assert services.current_revision_number() == revision  # no topology revision moved
    event = DataNodeAuditEvent.objects.get(node_name="sales")
    assert (event.action, event.actor, event.summary) == ("create", alice, "created, owned by user alice")


def test_its_owner_reads_the_stored_password_and_key_in_words_on_its_page(alice, alice_api, client):
    assert make_node(alice_api, secrets={"password": "s3cret"}).status_code == 201
    stored = DataNode.objects.get(name="sales").properties
    client.force_login(alice)
    page = client.get("/topology/datanodes/sales/").content.decode()
    assert "ENC(…) stored encrypted" in page and "the owner&#x27;s key, wrapped by the master key" in page
    assert stored["password"] not in page and stored["encrypt.wrapped.key"] not in page  # no blobs
    assert alice_api.get("/api/datanodes/sales").json()["properties"]["password"] == stored["password"]


def test_a_group_owns_the_node_its_member_makes_for_it(alice, alice_api):
    team = Group.objects.create(name="sales-team")
    alice.groups.add(team)
    made = make_node(alice_api, owner="sales-team", secrets={"password": "s3cret"})
    assert made.status_code == 201, made.content
    assert made.json()["owners"] == ["group sales-team"]
    stored = DataNode.objects.get(name="sales").properties
    assert client.owner_of(stored["password"]) == f"group:{team.pk}"
    assert CustomerKey.objects.get(owner_group=team).wrapped_key == stored["encrypt.wrapped.key"]
    assert not CustomerKey.objects.filter(owner_user=alice).exists()


def test_a_node_for_a_group_the_user_is_not_in_is_refused(alice_api):
    Group.objects.create(name="finance")
    refused = make_node(alice_api, owner="finance")
    assert refused.status_code == 400
    assert refused.json() == {"owner": ["You are not a member of a group named 'finance'."]}
    assert not DataNode.objects.exists()


def test_a_folder_node_lies_in_the_users_area_which_is_made_for_it(alice_api, data_dir):
    made = make_node(alice_api, "exports", kind="files", properties={"path": "users/alice/exports"})
    assert made.status_code == 201, made.content
    assert (data_dir / "users" / "alice" / "exports").is_dir()


def test_an_iceberg_node_keeps_its_catalog_and_warehouse_in_the_users_area(alice_api):
    made = make_node(
        alice_api,
        "tables",
        kind="iceberg",
        properties={"catalog.uri": "sqlite:///users/alice/catalog.db", "warehouse": "users/alice/warehouse"},
    )
    assert made.status_code == 201, made.content


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (
            {"properties": {"url": "jdbc:postgresql://10.0.0.9:5432/hr"}},
            "url",
            "10.0.0.9:5432 is not a database",
        ),
        (
            {"properties": {"url": "jdbc:postgresql://127.0.0.1:6543/x"}},
            "url",
            "127.0.0.1:6543 is not a database",
        ),
        ({"properties": {"url": "jdbc:sqlite:/etc/portal.db"}}, "url", "one host and a database"),
        ({"properties": {"url": "jdbc:postgresql://127.0.0.1:5432/"}}, "url", "one host and a database"),
        (
            {"properties": {"url": "jdbc:postgresql://127.0.0.1:5432,10.0.0.9:5432/x"}},
            "url",
            "one host and a database",
        ),
        (
            {
                "properties": {
                    "url": "jdbc:postgresql://127.0.0.1:5432/x?socketFactory=a.B&socketFactoryArg=c"
                }
            },
            "url",
            "'socketFactory' is not one",
        ),
        (
            {"properties": {"url": "jdbc:mariadb://127.0.0.1:3306/x?allowLocalInfile=true"}},
            "url",
            "'allowLocalInfile' is not one",
        ),
        ({"properties": {"url": SALES_DB, "driver": "org.h2.Driver"}}, "driver", "its database's own driver"),
        ({"properties": {"url": SALES_DB, "fetchsize": "10"}}, "fetchsize", "not a property a user-made"),
        ({"kind": "files", "properties": {"path": "/etc"}}, "path", "outside your areas"),
        ({"kind": "files", "properties": {"path": "users/bob/stuff"}}, "path", "outside your areas"),
        ({"kind": "files", "properties": {"path": "users/alice/../bob"}}, "path", "'..' segment"),
        ({"kind": "files", "properties": {"path": "hdfs://nn/users/alice"}}, "path", "not a local folder"),
        ({"kind": "files", "properties": {}}, "path", "required"),
        (
            {
                "kind": "iceberg",
                "properties": {"catalog.uri": "sqlite:///lake.db", "warehouse": "users/alice/w"},
            },
            "catalog.uri",
            "outside your areas",
        ),
        (
            {
                "kind": "iceberg",
                "properties": {
                    "catalog.uri": "postgresql+psycopg://u@10.1.1.1:5432/c",
                    "warehouse": "users/alice/w",
                },
            },
            "catalog.uri",
            "not a database server",
        ),
    ],
)
def test_a_node_outside_the_policy_is_refused_naming_the_property(alice_api, body, field, words):
    refused = make_node(alice_api, **body)
    assert refused.status_code == 400, refused.content
    messages = refused.json()["properties"]
    assert any(message.startswith(f"{field}: ") and words in message for message in messages), messages
    assert not DataNode.objects.exists()


def test_a_kind_the_policy_does_not_allow_is_refused_naming_the_kind(alice_api, settings):
    kafka = make_node(alice_api, kind="kafka", properties={"bootstrap.servers": "kafka1:9092"})
    assert kafka.status_code == 400 and "kind" in kafka.json()
    settings.USER_NODE_KINDS = ["files"]
    refused = make_node(alice_api)
    assert refused.json() == {"kind": ["users may make data nodes of these kinds: files (not 'jdbc')"]}


def test_the_administrators_widen_the_policy_in_the_settings_and_the_admin(
    alice, alice_api, settings, tmp_path
):
    url = "jdbc:postgresql://warehouse.example.org:5432/alice_dw"
    assert make_node(alice_api, "dw", properties={"url": url}).status_code == 400
    settings.USER_NODE_DATABASE_HOSTS = ["*.example.org:5432"]
    assert make_node(alice_api, "dw", properties={"url": url}).status_code == 201
    shared = tmp_path / "shared-exports"
    assert make_node(alice_api, "share", kind="files", properties={"path": str(shared)}).status_code == 400
    NodeArea.objects.create(path=str(shared), user=alice)
    assert (
        make_node(alice_api, "share", kind="files", properties={"path": str(shared / "a")}).status_code == 201
    )


def test_one_user_makes_at_most_as_many_nodes_as_the_policy_says(alice_api, settings):
    settings.USER_NODE_MAX_PER_USER = 2
    assert make_node(alice_api, "one").status_code == 201
    assert make_node(alice_api, "two").status_code == 201
    third = make_node(alice_api, "three")
    assert third.status_code == 400
    assert "USER_NODE_MAX_PER_USER=2" in third.json()["non_field_errors"][0]


def test_only_its_owners_and_staff_change_or_delete_a_users_node(alice_api, bob, staff):
    make_node(alice_api)
    bob_api = api_client_for(bob)
    assert bob_api.patch("/api/datanodes/sales", {"description": "mine"}, format="json").status_code == 403
    assert bob_api.delete("/api/datanodes/sales").status_code == 403
    assert bob_api.get("/api/datanodes/sales").status_code == 200  # it is visible: bob may ask for it
    assert (
        alice_api.patch("/api/datanodes/sales", {"description": "orders"}, format="json").status_code == 200
    )
    staff_api = api_client_for(staff)
    assert (
        staff_api.patch("/api/datanodes/sales", {"description": "checked"}, format="json").status_code == 200
    )
    assert DataNode.objects.get(name="sales").description == "checked"
    assert alice_api.delete("/api/datanodes/sales").status_code == 204
    assert [e.action for e in DataNodeAuditEvent.objects.order_by("at", "id")] == [
        "create",
        "update",
        "update",
        "delete",
    ]


def test_a_node_flows_use_is_not_deleted_but_the_refusal_names_them(alice, alice_api):
    make_node(alice_api)
    FlowConfigFactory(owner=alice, flow_group="alice", flow_name="nightly", source="sales")
    refused = alice_api.delete("/api/datanodes/sales")
    assert refused.status_code == 409
    assert "used by flows alice/nightly" in refused.json()["detail"]
    assert DataNode.objects.filter(name="sales").exists()


def test_a_co_owner_changing_where_the_node_points_types_the_password_again(alice, alice_api, bob):
    """Bob, made a co-owner, may not point Alice's node (and her password) at another server:
    the password he sends it with must be his own."""
    make_node(alice_api, secrets={"password": "alices-password"})
    acl = [{"role": "owner", "user": "alice"}, {"role": "owner", "user": "bob"}]
    assert alice_api.patch("/api/datanodes/sales", {"acl": acl}, format="json").status_code == 200
    bob_api = api_client_for(bob)
    stored = bob_api.get("/api/datanodes/sales").json()["properties"]
    moved = {**stored, "url": "jdbc:postgresql://localhost:5432/alice_trap"}
    refused = bob_api.patch("/api/datanodes/sales", {"properties": moved}, format="json")
    assert refused.status_code == 400
    assert any("password: " in m and "bound to another owner" in m for m in refused.json()["properties"])
    assert DataNode.objects.get(name="sales").properties["url"] == SALES_DB
    retyped = {key: value for key, value in moved.items() if key not in ("password", "encrypt.wrapped.key")}
    answer = bob_api.patch(
        "/api/datanodes/sales", {"properties": retyped, "secrets": {"password": "bobs"}}, format="json"
    )
    assert answer.status_code == 200, answer.content
    assert client.owner_of(DataNode.objects.get(name="sales").properties["password"]) == f"user:{bob.pk}"


def test_a_co_owner_cannot_widen_where_the_makers_node_may_land(alice, alice_api, bob, settings):
    """Bob, made a co-owner of Alice's node, does not bring his own databases to it: neither by
    pointing it at one, nor in what its connections may land in."""
    settings.USER_NODE_DATABASES = ["{user}_*"]
    make_node(alice_api, secrets={"password": "alices-password"})
    acl = [{"role": "owner", "user": "alice"}, {"role": "owner", "user": "bob"}]
    assert alice_api.patch("/api/datanodes/sales", {"acl": acl}, format="json").status_code == 200
    moved = {"url": "jdbc:postgresql://127.0.0.1:5432/bob_shop", "user": "bob"}
    refused = api_client_for(bob).patch(
        "/api/datanodes/sales", {"properties": moved, "secrets": {"password": "bobs"}}, format="json"
    )
    assert refused.status_code == 400
    assert any(m.startswith("url: refused") for m in refused.json()["properties"]), refused.json()
    bounds = policy.bounds_for(DataNode.objects.get(name="sales"))
    assert bounds is not None
    assert bounds.allows_database("alice_sales") and not bounds.allows_database("bob_shop")


def test_a_users_node_keeps_an_owner(alice_api):
    make_node(alice_api)
    refused = alice_api.patch(
        "/api/datanodes/sales", {"acl": [{"role": "read", "user": "alice"}]}, format="json"
    )
    assert refused.status_code == 400
    assert refused.json() == {"acl": ["A user-made data node needs at least one owner."]}
    assert DataNodeGrant.objects.get(node__name="sales").role == "owner"


def test_the_owner_changes_only_the_password(alice_api, alice):
    make_node(alice_api, secrets={"password": "old"})
    answer = alice_api.patch("/api/datanodes/sales", {"secrets": {"password": "new"}}, format="json")
    assert answer.status_code == 200, answer.content
    stored = DataNode.objects.get(name="sales").properties
    assert (stored["url"], stored["user"]) == (SALES_DB, "alice")
    assert decrypt_properties(stored)["password"] == "new"
    wrong = alice_api.patch("/api/datanodes/sales", {"secrets": {"url": "x"}}, format="json")
    assert wrong.status_code == 400 and wrong.json() == {"secrets": ["url: not a secret of a jdbc node"]}
