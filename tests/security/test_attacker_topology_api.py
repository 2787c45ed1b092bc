"""The topology's API and pages as an attacker sees them.

Node credentials: a data node written before the rule kept its database
password inside its JDBC URL, and `GET /api/datanodes` showed it to every
signed-in user. Mallory (granted read on the node) and Oscar (granted nothing)
now see the URL with its credentials masked, on the API and the pages; the
node's owners (an owner grant, here through a group) and staff see it whole.
A node saved now cannot hold a secret in clear text inside a value at all.

Malformed changes: `PATCH /api/topologies/{name}` with half a capability (or
other bodies of the wrong shape) answered 500; each is a 400 naming the field
and changes nothing."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group

from portal.topology import services
from portal.topology.models import DataNode, DataNodeGrant, SpecExecutor
from portal.topology.topologyfile import TopologyFileError
from tests.builders.api import api_client_for
from tests.factories import UserFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db

SECRET = "hunter2-secret"
LEGACY = {
    "sales": ("jdbc", {"url": f"jdbc:postgresql://db.example.org:5432/sales?user=svc&password={SECRET}"}),
    "shop": ("jdbc", {"url": f"jdbc:mysql://svc:{SECRET}@db.example.org:3306/shop"}),
    "events": (
        "kafka",
        {
            "bootstrap.servers": "kafka1:9092",
            "sasl.jaas.config": f'PlainLoginModule required username="svc" password="{SECRET}";',
            "sasl.password": "ENC(djE6dXNlcjo3OmFiY2RlZg==)",
        },
    ),
}


@pytest.fixture
def legacy(db, settings):
    """Nodes as they were stored before the rule: written directly, past the save checks."""
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"
    for name, (kind, properties) in LEGACY.items():
        DataNode.objects.create(name=name, kind=kind, properties=properties)
    return {node.name: node for node in DataNode.objects.all()}


@pytest.fixture
def people(legacy):
    mallory = UserFactory(username="mallory")  # may read every legacy node
    oscar = UserFactory(username="oscar")  # granted nothing
    dba = UserFactory(username="dana")  # owns them, through the dba group
    dbas = Group.objects.create(name="dba")
    dba.groups.add(dbas)
    for node in legacy.values():
        DataNodeGrant.objects.create(node=node, role="read", user=mallory)
        DataNodeGrant.objects.create(node=node, role="owner", group=dbas)
    staff = UserFactory(username="stella", is_staff=True)
    return {"mallory": mallory, "oscar": oscar, "dba": dba, "staff": staff}


def _seen_by(client, user) -> str:
    """Everything the user can read about the nodes: the API's list and details, the pages."""
    api = api_client_for(user)
    seen = [api.get("/api/datanodes").content.decode()]
    seen += [api.get(f"/api/datanodes/{name}").content.decode() for name in LEGACY]
    client.force_login(user)
    seen.append(client.get("/topology/").content.decode())
    for name in LEGACY:
        page = client.get(f"/topology/datanodes/{name}/")
        if page.status_code == 200:  # 404 to a user the node is not granted to
            seen.append(page.content.decode())
    return "\n".join(seen)


@pytest.mark.parametrize("who", ["mallory", "oscar"])
def test_a_node_password_is_shown_to_nobody_but_its_owners_and_staff(client, people, who):
    seen = _seen_by(client, people[who])
    assert SECRET not in seen
    assert "djE6dXNlcjo3" not in seen  # an ENC value names whose key made it: not shown either
    api = api_client_for(people[who])
    shown = {node["name"]: node["properties"] for node in api.get("/api/datanodes").json()["results"]}
    # the login is half of a credential: hidden too (issue #46)
    assert (
        shown["sales"]["url"] == "jdbc:postgresql://db.example.org:5432/sales?user=********&password=********"
    )
    assert shown["shop"]["url"] == "jdbc:mysql://********@db.example.org:3306/shop"
    assert (
        shown["events"]["sasl.jaas.config"]
        == 'PlainLoginModule required username="********" password="********";'
    )
    assert shown["events"]["sasl.password"] == "ENC(…)"


@pytest.mark.parametrize("who", ["dba", "staff"])
def test_owners_and_staff_see_the_node_whole(client, people, who):
    seen = _seen_by(client, people[who])
    assert f"password={SECRET}" in seen and f"svc:{SECRET}@" in seen
    body = api_client_for(people[who]).get("/api/datanodes/events").json()
    assert body["properties"] == LEGACY["events"][1]


def test_the_list_asks_once_who_owns_what(people, django_assert_num_queries):
    """Masking a list of nodes costs one query for the caller's owned nodes, not one per node."""
    api = api_client_for(people["mallory"])
    for name in ("n1", "n2", "n3", "n4"):
        DataNode.objects.create(name=name, kind="files", properties={"path": f"var/data/{name}"})
    count = DataNode.objects.count()
    # the count and the page, the grants (acl) of each node as before, and the owned nodes once
    with django_assert_num_queries(2 + count + 1):
        assert api.get("/api/datanodes").status_code == 200


@pytest.mark.parametrize(
    ("kind", "properties", "key", "what"),
    [
        ("jdbc", {"url": f"jdbc:postgresql://db:5432/sales?user=svc&password={SECRET}"}, "url", "password="),
        ("jdbc", {"url": f"jdbc:mysql://svc:{SECRET}@db:3306/shop"}, "url", "user:password@"),
        ("jdbc", {"url": f"jdbc:mariadb://db/shop?user=svc&password1={SECRET}"}, "url", "password1="),
        ("files", {"path": f"hdfs://svc:{SECRET}@namenode:8020/lake"}, "path", "user:password@"),
        (
            "kafka",
            {"bootstrap.servers": "k:9092", "sasl.jaas.config": f'x required password="{SECRET}";'},
            "sasl.jaas.config",
            "password=",
        ),
        ("other", {"endpoint": f"https://api.example.org/v1?api_key={SECRET}"}, "endpoint", "api_key="),
    ],
)
def test_a_secret_inside_a_value_is_refused_at_save_naming_the_key(people, kind, properties, key, what):
    api = api_client_for(people["staff"])
    response = api.post(
        "/api/datanodes", {"name": "new", "kind": kind, "properties": properties}, format="json"
    )
    assert response.status_code == 400, response.content
    problems = " ".join(response.json()["properties"])
    assert f"{key}: holds a secret in clear text ({what})" in problems
    assert "ENC(...) in the node's password property" in problems
    assert SECRET not in problems
    assert not DataNode.objects.filter(name="new").exists()


def test_changing_a_legacy_node_asks_for_its_password_to_leave_the_url(people):
    api = api_client_for(people["staff"])
    refused = api.patch("/api/datanodes/sales", {"description": "orders"}, format="json")
    assert refused.status_code == 400 and "url: holds a secret in clear text" in str(refused.json())
    fixed = api.patch(
        "/api/datanodes/sales",
        {"properties": {"url": "jdbc:postgresql://db.example.org:5432/sales?user=svc"}},
        format="json",
    )
    assert fixed.status_code == 200, fixed.content


def test_the_node_form_puts_the_refusal_under_the_url_field(client, people):
    client.force_login(people["staff"])
    response = client.post(
        "/topology/datanodes/new/",
        {"name": "new", "kind": "jdbc", "conn_url": f"jdbc:postgresql://db/sales?password={SECRET}"},
    )
    assert response.status_code == 400
    assert "holds a secret in clear text (password=)" in response.context["form"].errors["conn_url"][0]


def test_a_topology_file_with_a_password_in_a_url_is_refused_naming_the_line(tmp_path, db):
    path = tmp_path / "topology.yaml"
    path.write_text(
        "dataNodes:\n"
        "  - name: sales\n"
        "    kind: jdbc\n"
        "    properties:\n"
        f"      url: jdbc:postgresql://db/sales?user=svc&password={SECRET}\n"
    )
    with pytest.raises(TopologyFileError) as error:
        services.load_topology_file(path)
    assert f"{path}:2: dataNodes 'sales': properties: url: holds a secret in clear text (password=)" in str(
        error.value
    )
    assert not DataNode.objects.exists()


# --- malformed topology changes --------------------------------------------------------------

MALFORMED = [
    ({"capabilities": [{"destination": "b"}]}, "capabilities", "source"),
    ({"capabilities": [{"source": "a"}]}, "capabilities", "destination"),
    ({"capabilities": [{}]}, "capabilities", "source"),
    ({"capabilities": [{"source": "a", "destination": "b"}, {"destination": "c"}]}, "capabilities", "source"),
    ({"capabilities": [None]}, "capabilities", "null"),
    ({"capabilities": [["a", "b"]]}, "capabilities", "Invalid data"),
    ({"capabilities": {"source": "a", "destination": "b"}}, "capabilities", "list"),
    ({"capabilities": "a -> b"}, "capabilities", "list"),
    ({"capabilities": [{"source": 1, "destination": ["b"]}]}, "capabilities", "Must be a string"),
    ({"capabilities": [{"source": "a", "destination": "a"}]}, "capabilities", "same node"),
    ({"sparkConf": "spark.x=1"}, "sparkConf", "dictionary"),
    ({"sparkConf": {"spark.x": None}}, "sparkConf", "null"),
    ({"cost": None}, "cost", "null"),
    ({"enabled": "perhaps"}, "enabled", "boolean"),
]


@pytest.mark.parametrize(("body", "field", "words"), MALFORMED)
def test_a_malformed_patch_is_400_naming_the_field_and_changes_nothing(staff, body, field, words):
    nodes("a", "b", "c")
    executor("x1", "a>b")
    before = SpecExecutor.objects.get(name="x1").updated
    response = api_client_for(staff).patch("/api/topologies/x1", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json() and words.lower() in json.dumps(response.json()).lower()
    after = SpecExecutor.objects.get(name="x1")
    assert after.updated == before
    assert [(c.source.name, c.destination.name) for c in after.capabilities.all()] == [("a", "b")]


def test_a_patch_that_is_not_an_object_is_400(staff):
    nodes("a", "b")
    executor("x1", "a>b")
    for body in ([1, 2], "text"):
        response = api_client_for(staff).patch("/api/topologies/x1", body, format="json")
        assert response.status_code == 400, (body, response.content)


def test_a_legacy_node_password_stays_out_of_the_compile_preview_and_the_jobs(client, people, tmp_path):
    """The hop keys carry a node's connection values into every compiled job: the API's preview,
    a flow's stored jobs and the form's preview show them masked."""
    lake = services.create_data_node({"name": "lake", "kind": "files", "properties": {"path": str(tmp_path)}})
    DataNodeGrant.objects.create(node=lake, role="write", user=people["mallory"])
    executor("x1", "sales>lake")
    body = {
        "flowGroup": "mal",
        "flowName": "peek",
        "source": "sales",
        "destinations": ["lake"],
        "properties": {"source.jdbc.tables": "public.orders", "extract.is.full": "true"},
    }
    api = api_client_for(people["mallory"])
    preview = api.post("/api/flowconfigs/compile", body, format="json")
    assert preview.status_code == 200 and preview.json()["jobs"], preview.content
    assert SECRET not in preview.content.decode()
    assert "password=********" in preview.content.decode()
    saved = api.post("/api/flowconfigs", body, format="json")
    assert saved.status_code == 201, saved.content
    assert SECRET not in api.get("/api/flowconfigs/mal/peek/jobs").content.decode()
    client.force_login(people["mallory"])
    form = {
        "flow_group": "mal",
        "flow_name": "peek2",
        "source": "sales",
        "destinations_text": "lake",
        "properties_text": "source.jdbc.tables=public.orders\nextract.is.full=true",
    }
    page = client.post("/flows/new/?part=compile", form, HTTP_HX_REQUEST="true").content.decode()
    assert "mal.peek2.1-sales-to-lake" in page and "password=********" in page
    assert SECRET not in page


def test_a_nodes_login_stays_out_of_every_flows_jobs_and_previews(client, people, tmp_path):
    """Every signed-in user may read a flow's compiled jobs; the hop keys carry its nodes' logins,
    which are the nodes' owners' and staff's to see (issue #46): masked there, user name included."""
    vault = services.create_data_node(
        {
            "name": "vault",
            "kind": "jdbc",
            "properties": {"url": "jdbc:postgresql://db.example.org:5432/vault", "user": "vault_owner_login"},
        }
    )
    lake = services.create_data_node({"name": "lake", "kind": "files", "properties": {"path": str(tmp_path)}})
    DataNodeGrant.objects.create(node=lake, role="write", user=people["mallory"])
    DataNodeGrant.objects.create(node=vault, role="read", user=people["mallory"])  # a reader, not an owner
    executor("x1", "vault>lake")
    body = {
        "flowGroup": "mal",
        "flowName": "peek",
        "source": "vault",
        "destinations": ["lake"],
        "properties": {"source.jdbc.tables": "public.orders", "extract.is.full": "true"},
    }
    api = api_client_for(people["mallory"])
    preview = api.post("/api/flowconfigs/compile", body, format="json")
    assert preview.status_code == 200 and preview.json()["jobs"], preview.content
    properties = preview.json()["jobs"][0]["properties"]
    assert properties["flowport.hop.source.user"] == "********"
    assert "vault_owner_login" not in preview.content.decode()
    client.force_login(people["mallory"])
    form = {
        "flow_group": "mal",
        "flow_name": "peek2",
        "source": "vault",
        "destinations_text": "lake",
        "properties_text": "source.jdbc.tables=public.orders\nextract.is.full=true",
    }
    page = client.post("/flows/new/?part=compile", form, HTTP_HX_REQUEST="true").content.decode()
    assert "flowport.hop.source.user=********" in page and "vault_owner_login" not in page


def test_a_reader_cannot_choose_the_login_of_a_node_with_an_account(people, tmp_path):
    """Mallory reads `vault`, whose account is the administrators' choice; her flow names the
    server's superuser (no password: the server trusts the workers). The job she would run
    connects as the node says (issue #46, re-tested; a login typed for Test connection likewise:
    tests/unit/topology/test_connections.py)."""
    from portal.flows import services as flows
    from portal.flows.compiler import compile_flow
    from portal.pipeline.jobspec import JobSpec

    vault = services.create_data_node(
        {
            "name": "vault",
            "kind": "jdbc",
            "properties": {"url": "jdbc:postgresql://127.0.0.1:1/vault", "user": "reader"},
        }
    )
    lake = services.create_data_node({"name": "lake", "kind": "files", "properties": {"path": str(tmp_path)}})
    DataNodeGrant.objects.create(node=lake, role="write", user=people["mallory"])
    DataNodeGrant.objects.create(node=vault, role="read", user=people["mallory"])
    executor("x1", "vault>lake")
    flow = flows.create_flow(
        owner=people["mallory"],
        data={
            "flow_group": "mal",
            "flow_name": "su",
            "source": "vault",
            "destinations": ["lake"],
            "paused": True,
            "properties": {
                "source.jdbc.tables": "public.orders",
                "extract.is.full": "true",
                "source.conn.username": "postgres",
                "source.conn.password": "",
            },
        },
    )
    (job,) = compile_flow(flow).to_dict()["jobs"]
    assert JobSpec(job_name="j", properties=job["properties"]).props.get("source.conn.username") == "reader"


@pytest.mark.parametrize(
    ("node", "flow_keys"),
    [
        # a branch's writer reads writer.jdbc.username.0 before writer.jdbc.username
        (
            {"url": "jdbc:postgresql://127.0.0.1:1/vault", "user": "writer"},
            {"writer.jdbc.username.0": "postgres"},
        ),
        # an administrator's node keeping its login in its URL has an account too
        ({"url": "jdbc:postgresql://127.0.0.1:1/vault?user=writer"}, {"writer.jdbc.username": "postgres"}),
    ],
)
def test_no_spelling_of_a_flows_login_chooses_who_a_destination_takes_it_for(
    people, tmp_path, node, flow_keys
):
    from portal.flows import services as flows
    from portal.flows.compiler import compile_flow
    from portal.pipeline.jobspec import JobSpec

    source = services.create_data_node(
        {"name": "drop", "kind": "files", "properties": {"path": str(tmp_path)}}
    )
    vault = services.create_data_node({"name": "vault", "kind": "jdbc", "properties": node})
    DataNodeGrant.objects.create(node=source, role="read", user=people["mallory"])
    DataNodeGrant.objects.create(node=vault, role="write", user=people["mallory"])
    executor("x1", "drop>vault")
    flow = flows.create_flow(
        owner=people["mallory"],
        data={
            "flow_group": "mal",
            "flow_name": "pwn",
            "source": "drop",
            "destinations": ["vault"],
            "paused": True,
            "properties": {"source.files.format": "csv", "writer.jdbc.table": "pwned", **flow_keys},
        },
    )
    (job,) = compile_flow(flow).to_dict()["jobs"]
    branch = JobSpec(job_name="j", properties=job["properties"]).props.for_branch(0, 1, "fork_0")
    assert branch.get("writer.jdbc.username") in ("writer", None)  # the node's (in its URL: the driver's)
