"""Topology pages: everyone signed in can look, only staff can change the administrators'
topology (a user's own data nodes: test_user_node_pages.py)."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.topology.models import Capability, DataNode, SpecExecutor
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_overview_shows_graph_executors_and_health(outsider):
    nodes("landing", "lake")
    executor("ingest", "landing>lake")
    page = client_for(outsider).get("/topology/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "<svg" in html and ">ingest</text>" in html and ">landing</text>" in html
    assert "New executor" not in html


CHANGES = [
    ("get", "/topology/executors/new/", None),
    (
        "post",
        "/topology/executors/new/",
        {"name": "y", "technology": "spark-local", "spark_master": "local", "cost": 1},
    ),
    ("post", "/topology/executors/ingest/toggle/", {}),
    ("post", "/topology/executors/ingest/delete/", {}),
    ("post", "/topology/executors/ingest/capabilities/", {"source": "lake", "destination": "landing"}),
    ("post", "/topology/datanodes/lake/edit/", {"kind": "files", "description": "x"}),
    ("post", "/topology/datanodes/lake/delete/", {}),
]


@pytest.mark.parametrize(("method", "url", "data"), CHANGES)
def test_non_staff_cannot_change_the_topology_pages(outsider, method, url, data):
    nodes("landing", "lake")
    executor("ingest", "landing>lake")
    response = getattr(client_for(outsider), method)(url, data or {})
    assert response.status_code == 403
    assert list(SpecExecutor.objects.values_list("name", "enabled")) == [("ingest", True)]
    assert Capability.objects.count() == 1
    assert set(DataNode.objects.values_list("name", flat=True)) == {"landing", "lake"}


def test_staff_creates_executor_and_sees_field_errors(staff):
    client = client_for(staff)
    bad = client.post(
        "/topology/executors/new/",
        {"name": "x", "technology": "spark-local", "spark_master": "spark://nohost", "cost": 1},
    )
    assert bad.status_code == 400
    assert "is not a Spark master URL" in bad.content.decode()
    good = client.post(
        "/topology/executors/new/",
        {
            "name": "x",
            "technology": "spark-local",
            "spark_master": "local[2]",
            "cost": 1,
            "enabled": "on",
            "spark_conf_text": "spark.sql.shuffle.partitions=2",
        },
    )
    assert good.status_code == 302
    executor_row = SpecExecutor.objects.get(name="x")
    assert executor_row.spark_conf == {"spark.sql.shuffle.partitions": "2"}
    assert executor_row.queue == "executor.x"


def test_staff_edits_capabilities_with_htmx_and_toggles(staff):
    nodes("a", "b")
    executor("x", "a>b")
    client = client_for(staff)
    added = client.post(
        "/topology/executors/x/capabilities/", {"source": "b", "destination": "a"}, HTTP_HX_REQUEST="true"
    )
    assert added.status_code == 200
    assert "<h2>Capabilities</h2>" in added.content.decode()
    assert Capability.objects.filter(executor__name="x").count() == 2
    duplicate = client.post(
        "/topology/executors/x/capabilities/", {"source": "b", "destination": "a"}, HTTP_HX_REQUEST="true"
    )
    assert duplicate.status_code == 400
    assert "x already has b → a." in duplicate.content.decode()
    capability = Capability.objects.get(source__name="b")
    removed = client.post(
        f"/topology/executors/x/capabilities/{capability.pk}/remove/", HTTP_HX_REQUEST="true"
    )
    assert removed.status_code == 200
    assert Capability.objects.filter(executor__name="x").count() == 1
    # Disabling asks first (test_executor_disable.py); the confirmation's POST disables.
    assert client.post("/topology/executors/x/disable/").status_code == 302
    assert SpecExecutor.objects.get(name="x").enabled is False
    detail = client.get("/topology/executors/x/").content.decode()
    assert "not used by the compiler (disabled)" in detail


def test_staff_data_node_delete_in_use_is_explained(staff):
    nodes("a", "b")
    executor("x", "a>b")
    response = client_for(staff).post("/topology/datanodes/a/delete/")
    assert response.status_code == 409
    assert "used by capabilities of x" in response.content.decode()
    client_for(staff).post("/topology/executors/x/delete/")
    assert client_for(staff).post("/topology/datanodes/a/delete/").status_code == 302
    assert not DataNode.objects.filter(name="a").exists()
