"""A data team replicates a whole PostgreSQL schema through the portal: the flow is saved through
the API with ``source.jdbc.tables = shop.*`` (a pattern matching nothing is refused, naming the
field), a real worker runs it on Spark, one dataset per table; then the team adds a column to a
table and creates another table, and the next run takes both — the watermark page shows the
schema history of the altered table."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from django.test import Client

from portal.flows.models import FlowConfig
from portal.orchestration import services
from portal.orchestration.models import DatasetState, ExecutionStatus
from portal.topology import services as topology
from tests.builders.api import api_client_for
from tests.builders.queues import INGEST_QUEUE
from tests.builders.stack import finished
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def shop():
    """A source database of its own with schema ``shop``: orders and customers."""
    database = f"flowport_ws_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
    conninfo = f"postgres://postgres@127.0.0.1:5432/{database}"
    with psycopg.connect(conninfo, autocommit=True) as db:
        db.execute("CREATE SCHEMA shop")
        db.execute("CREATE TABLE shop.orders (id int PRIMARY KEY, total numeric(10,2), seq int)")
        db.execute("INSERT INTO shop.orders SELECT g, g * 1.5, g FROM generate_series(1, 6) g")
        db.execute("CREATE TABLE shop.customers (id int PRIMARY KEY, name text, seq int)")
        db.execute("INSERT INTO shop.customers SELECT g, 'c' || g, g FROM generate_series(1, 4) g")
    yield {"database": database, "conninfo": conninfo}
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{database}" WITH (FORCE)')


def published(lake, urn: str) -> list[dict]:
    rows = []
    for path in sorted((lake / "shop-it" / "replica" / urn).rglob("*.json")):
        rows.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return sorted(rows, key=lambda r: r["id"])


def test_a_whole_schema_flow_saved_through_the_api_runs_table_by_table(tmp_path, shop, worker, scheduler):
    owner = UserFactory(username="olivia")
    lake = tmp_path / "lake"
    lake.mkdir()
    topology.create_data_node(
        {
            "name": "shopdb",
            "kind": "jdbc",
            "properties": {"url": f"jdbc:postgresql://127.0.0.1:5432/{shop['database']}", "user": "postgres"},
        }
    )
    topology.create_data_node({"name": "lake", "kind": "files", "properties": {"path": str(lake)}})
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[2]", "queue": INGEST_QUEUE},
        capabilities=[("shopdb", "lake")],
    )
    api = api_client_for(owner)
    body = {
        "flowGroup": "shop-it",
        "flowName": "replica",
        "schedule": "0 0 1 1 *",  # once a year: the story runs it itself
        "runImmediately": False,
        "source": "shopdb",
        "destinations": ["lake"],
        "properties": {
            "source.jdbc.tables": "shop.nothing_*",
            "extract.delta.fields": "seq",
            "schema.evolution.policy": "evolve",
            "job.commit.policy": "partial",
            "writer.output.format": "json",
        },
    }
    refused = api.post("/api/flowconfigs", body, format="json")
    assert refused.status_code == 400, refused.content
    assert refused.json()["properties"] == [
        "source.jdbc.tables: the pattern 'shop.nothing_*' matches no table of data node 'shopdb' (2 table(s) "
        "there; a pattern without a schema matches the default schema's tables)"
    ]

    body["properties"]["source.jdbc.tables"] = "shop.*"
    preview = api.post("/api/flowconfigs/compile", body, format="json").json()
    assert preview["status"] == "COMPILED" and preview["jobs"][0]["datasets"] == [
        "shop.customers",
        "shop.orders",
    ]
    assert "source.jdbc.tables matches 2 table(s) now: shop.customers, shop.orders" in preview["message"]
    saved = api.post("/api/flowconfigs", body, format="json")
    assert saved.status_code == 201, saved.content
    flow = FlowConfig.objects.get(flow_group="shop-it", flow_name="replica")

    first = finished(services.run_now(flow, user=owner), timeout=180)
    assert first.status == ExecutionStatus.COMMITTED, first.message
    marks = dict(DatasetState.objects.filter(flow_id=flow.pk).values_list("dataset_urn", "watermark"))
    assert marks == {"shop.orders": "6", "shop.customers": "4"}

    with psycopg.connect(shop["conninfo"], autocommit=True) as db:
        db.execute("ALTER TABLE shop.orders ADD COLUMN coupon text")
        db.execute("INSERT INTO shop.orders VALUES (7, 10.5, 7, 'SPRING')")
        db.execute("CREATE TABLE shop.refunds (id int PRIMARY KEY, order_id int, seq int)")
        db.execute("INSERT INTO shop.refunds VALUES (1, 3, 1)")
    second = finished(services.run_now(flow, user=owner), timeout=180)
    assert second.status == ExecutionStatus.COMMITTED, second.message
    marks = dict(DatasetState.objects.filter(flow_id=flow.pk).values_list("dataset_urn", "watermark"))
    assert marks == {"shop.orders": "7", "shop.customers": "4", "shop.refunds": "1"}
    orders = published(lake, "shop.orders")
    assert [r["id"] for r in orders] == [1, 2, 3, 4, 5, 6, 7] and orders[-1]["coupon"] == "SPRING"
    assert [r["order_id"] for r in published(lake, "shop.refunds")] == [3]

    staff = Client()
    staff.force_login(UserFactory(username="stella", is_staff=True))
    state = DatasetState.objects.get(flow_id=flow.pk, dataset_urn="shop.orders")
    page = staff.get(f"/state/{state.pk}/").content.decode()
    history = page.split('id="state-schemas"')[1].split("</section>")[0]
    assert history.count('class="schema-row"') == 2
    assert "<strong>added coupon (string)</strong>" in history and "first recorded" in history
    assert "coupon string" in history
