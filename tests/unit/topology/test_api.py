"""`/api/topologies` and `/api/datanodes`: read for everyone signed in,
changes for staff, bad input as 4xx with the field and the reason."""

from __future__ import annotations

import pytest

from portal.topology.models import DataNode, SpecExecutor
from tests.builders.api import api_client_for
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db

EXECUTOR = {
    "name": "x1",
    "technology": "spark-standalone",
    "location": "fabric-a",
    "sparkMaster": "spark://m1:7077",
    "sparkConf": {"spark.executor.memory": "2g"},
    "cost": 5,
    "capabilities": [{"source": "a", "destination": "b"}],
}


@pytest.fixture
def staff_api(staff):
    return api_client_for(staff)


def test_staff_creates_an_executor_with_capabilities(staff_api):
    nodes("a", "b")
    response = staff_api.post("/api/topologies", EXECUTOR, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["queue"] == "executor.x1"
    assert body["uri"] == "flowport://executors/x1"
    assert body["capabilities"] == [{"source": "a", "destination": "b"}]
    assert body["health"] == {"status": "UNKNOWN", "message": "", "lastHeartbeat": None}
    assert staff_api.get("/api/topologies/x1").json()["sparkConf"] == {"spark.executor.memory": "2g"}


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        ({"sparkMaster": "spark://nohost"}, "sparkMaster", "is not a Spark master URL"),
        (
            {"capabilities": [{"source": "a", "destination": "ghost"}]},
            "capabilities",
            "unknown destination data node 'ghost'",
        ),
        ({"name": "bad name"}, "name", "Use 1-128 letters"),
        ({"cost": "cheap"}, "cost", "A valid integer is required."),
        ({"sparkConf": {"executor.memory": "2g"}}, "sparkConf", "Spark conf keys start with 'spark.'"),
        ({"technology": "mesos"}, "technology", "is not a valid choice"),
    ],
)
def test_bad_executor_input_is_400_with_field_and_reason(staff_api, change, field, reason):
    nodes("a", "b")
    response = staff_api.post("/api/topologies", {**EXECUTOR, **change}, format="json")
    assert response.status_code == 400
    assert reason in str(response.json()[field])
    assert not SpecExecutor.objects.exists()


def test_duplicate_executor_name_is_400(staff_api):
    nodes("a", "b")
    assert staff_api.post("/api/topologies", EXECUTOR, format="json").status_code == 201
    response = staff_api.post("/api/topologies", EXECUTOR, format="json")
    assert response.status_code == 400
    assert response.json()["name"] == ["Spec executor with this Name already exists."]


def test_patch_replaces_capabilities_and_disables(staff_api):
    nodes("a", "b", "c")
    executor("x1", "a>b")
    response = staff_api.patch(
        "/api/topologies/x1",
        {"enabled": False, "capabilities": [{"source": "b", "destination": "c"}]},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["enabled"] is False
    assert response.json()["capabilities"] == [{"source": "b", "destination": "c"}]
    rename = staff_api.patch("/api/topologies/x1", {"name": "x2"}, format="json")
    assert rename.status_code == 400
    assert "cannot change" in rename.json()["name"][0]


def test_a_jdbc_node_must_name_a_database_flowport_has_a_dialect_for(staff_api):
    refused = staff_api.post(
        "/api/datanodes",
        {"name": "ora", "kind": "jdbc", "properties": {"url": "jdbc:oracle:thin:@db:1521/x"}},
        format="json",
    )
    assert refused.status_code == 400
    assert "no SQL dialect for 'oracle'" in str(refused.json()["properties"]), refused.json()
    for name, url in (("maria", "jdbc:mariadb://db:3306/nyc"), ("lite", "jdbc:sqlite:/srv/data/nyc.db")):
        body = {"name": name, "kind": "jdbc", "properties": {"url": url, "driver": "org.mariadb.jdbc.Driver"}}
        assert staff_api.post("/api/datanodes", body, format="json").status_code == 201


def test_data_node_crud_and_delete_in_use_is_409(staff_api):
    response = staff_api.post(
        "/api/datanodes",
        {"name": "a", "kind": "jdbc", "properties": {"url": "jdbc:postgresql://h/db"}},
        format="json",
    )
    assert response.status_code == 201
    nodes("b")
    executor("x1", "a>b")
    assert staff_api.delete("/api/datanodes/a").status_code == 409
    assert staff_api.patch("/api/datanodes/a", {"description": "orders"}, format="json").status_code == 200
    assert DataNode.objects.get(name="a").description == "orders"
    bad = staff_api.post("/api/datanodes", {"name": "c", "properties": {"n": 1}}, format="json")
    assert bad.status_code == 400
    assert bad.json()["properties"] == {"n": ["Must be a string, not int."]}
    nul = staff_api.post("/api/datanodes", {"name": "c", "properties": {"k\u0000": "v"}}, format="json")
    assert nul.status_code == 400
    assert "NUL character" in nul.json()["properties"][0]


def test_non_staff_reads_but_cannot_change_the_topology(outsider):
    """Oscar may make data nodes of his own (tests/unit/topology/test_user_nodes.py), never change
    the executors or an administrator's node."""
    nodes("a", "b")
    executor("x1", "a>b")
    api = api_client_for(outsider)
    assert api.get("/api/topologies").json()["results"][0]["name"] == "x1"
    assert api.get("/api/datanodes/a").status_code == 200
    for method, url, body in [
        ("post", "/api/topologies", {**EXECUTOR, "name": "x9"}),
        ("patch", "/api/topologies/x1", {"enabled": False}),
        ("delete", "/api/topologies/x1", None),
        ("patch", "/api/datanodes/a", {"description": "mine now"}),
        ("delete", "/api/datanodes/a", None),
    ]:
        response = getattr(api, method)(url, body, format="json")
        assert response.status_code == 403, (method, url)
    assert SpecExecutor.objects.get(name="x1").enabled is True
    assert api_client_for(None).get("/api/topologies").status_code in (401, 403)


def test_topology_list_has_no_n_plus_one(staff_api, django_assert_max_num_queries):
    nodes("a", "b", "c")
    for i in range(10):
        executor(f"x{i}", "a>b", "b>c")
    with django_assert_max_num_queries(8):
        assert len(staff_api.get("/api/topologies").json()["results"]) == 10


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/topologies", []),
        ("/api/topologies", {"name": "x", "capabilities": "a -> b"}),
        ("/api/topologies", {"name": "x", "capabilities": [["a", "b"]]}),
        ("/api/topologies", {"name": "x", "capabilities": [{"source": "a", "destination": "a"}]}),
        ("/api/topologies", {"name": "x", "sparkConf": ["spark.x"]}),
        ("/api/topologies", {"name": "x", "cost": -1}),
        ("/api/topologies", {"name": "x", "queue": "has space"}),
        ("/api/topologies", {"name": "x" * 200}),
        ("/api/datanodes", {"name": "a\u0000"}),
        ("/api/datanodes", {"name": "a", "kind": None}),
        ("/api/flowconfigs/compile", {"flowGroup": "g", "flowName": "n", "properties": {"": "v"}}),
        ("/api/flowconfigs/compile", {"flowGroup": "g", "flowName": "n", "destinations": [1]}),
    ],
)
def test_odd_bodies_are_400_never_500(staff_api, url, body):
    nodes("a", "b")
    response = staff_api.post(url, body, format="json")
    assert response.status_code == 400, response.content
    assert not SpecExecutor.objects.exists()
