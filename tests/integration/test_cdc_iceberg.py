"""A data team follows a PostgreSQL table by its log into an Iceberg table, through the portal: a
private ``wal_level=logical`` server, a real worker running the cdc flow on Spark, an Iceberg table
on a SQL catalog merged by key. Inserts, updates and deletes reach the table (deletes as Iceberg
row-level deletes), a column added on the source is added to the table as the flow's drift policy
(``evolve``) says, and after every run the table equals the source row by row, each key once, with
the table's last commit carrying the log position the state store holds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from django.contrib.auth import get_user_model

from portal.flows import services as flow_services
from portal.orchestration import services
from portal.orchestration.models import DatasetState, ExecutionStatus
from portal.pipeline.cdc import pg as cdc_pg
from portal.pipeline.destinations.iceberg import load_catalog
from portal.topology import services as topology
from tests.builders.queues import INGEST_QUEUE
from tests.builders.stack import finished
from tests.pg_logical import logical_pg, own_database  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

CDC_MERGE = {
    "source.class": "portal.pipeline.sources.cdc.CdcSource",
    "source.cdc.tables": "shop.customers",
    "writer.write.mode": "merge",
    "extract.primary.key.fields": "id",
    "extract.delta.fields": "_cdc_position",
    "writer.merge.delete.column": "_cdc_deleted",
}


@pytest.fixture
def shop(logical_pg: str) -> Iterator[dict[str, Any]]:  # noqa: F811
    with own_database(
        logical_pg,
        "CREATE SCHEMA shop",
        "CREATE TABLE shop.customers (id int PRIMARY KEY, name text, balance numeric(10,2))",
        "INSERT INTO shop.customers SELECT g, 'c' || g, g * 1.5 FROM generate_series(1, 20) g",
    ) as found:
        yield found


def iceberg_rows(table: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    """The table's current rows (the latest snapshot, deletes applied), ordered by key."""
    rows = table.scan().to_arrow().to_pylist()
    return sorted((tuple(r.get(c) for c in columns) for r in rows), key=lambda r: r[0])


def source_rows(db: psycopg.Connection, columns: list[str]) -> list[tuple[Any, ...]]:
    return db.execute(f"SELECT {', '.join(columns)} FROM shop.customers ORDER BY id").fetchall()  # noqa: S608


def test_a_cdc_flow_keeps_an_iceberg_table_equal_to_its_source(shop, tmp_path, worker, scheduler):
    owner = get_user_model().objects.create(username="ines")
    catalog_uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", str(tmp_path / "warehouse")
    topology.create_data_node(
        {"name": "shopdb", "kind": "jdbc", "properties": {"url": shop["url"], "user": "postgres"}}
    )
    topology.create_data_node(
        {
            "name": "lakehouse",
            "kind": "iceberg",
            "properties": {"catalog.uri": catalog_uri, "warehouse": warehouse},
        }
    )
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[2]", "queue": INGEST_QUEUE},
        capabilities=[("shopdb", "lakehouse")],
    )
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "shop",
            "flow_name": "customers-ice",
            "source": "shopdb",
            "destinations": ["lakehouse"],
            "properties": {
                **CDC_MERGE,
                "writer.iceberg.table": "customers",
                "schema.evolution.policy": "evolve",
            },
            "paused": True,  # the story runs it itself
        },
    )
    flow = flow_services.set_paused(flow, False)
    db = shop["db"]
    slot = cdc_pg.slot_name(flow.pk, "shop", "customers-ice")
    columns = ["id", "name", "balance"]
    job = flow.compiled_dag.dag["jobs"][0]["jobName"]

    def run_and_compare(expected_rows: int | None = None) -> str:
        execution = finished(services.run_now(flow, user=owner), timeout=300)
        assert execution.status == ExecutionStatus.COMMITTED, execution.message
        table = load_catalog(catalog_uri, None, warehouse).load_table(("shop", "customers"))
        got = iceberg_rows(table, columns)
        assert got == source_rows(db, columns)
        assert len({r[0] for r in got}) == len(got)  # each key once
        if expected_rows is not None:
            assert len(got) == expected_rows
        mark = DatasetState.objects.get(flow_id=flow.pk, dataset_urn="shop.customers").watermark
        summary = table.current_snapshot().summary.additional_properties
        assert summary["flowport.watermark"] == mark  # the position is in the table's own commit
        committed = json.loads(table.properties[f"flowport.watermark.{job}.shop.customers"])
        assert committed["watermark"] == mark
        state = cdc_pg.state(db, slot)
        assert state is not None and state.confirmed == cdc_pg.parse_lsn(mark)  # released after it
        return mark

    first = run_and_compare(expected_rows=20)

    db.execute("INSERT INTO shop.customers VALUES (21, 'c21', 3)")
    db.execute("UPDATE shop.customers SET balance = balance * 2, name = name || '!' WHERE id % 4 = 0")
    db.execute("DELETE FROM shop.customers WHERE id IN (3, 7)")
    with db.transaction():  # one transaction: the key changes twice, the last state wins
        db.execute("UPDATE shop.customers SET name = 'gone soon' WHERE id = 5")
        db.execute("DELETE FROM shop.customers WHERE id = 5")
        db.execute("INSERT INTO shop.customers VALUES (5, 'c5 again', 0)")
    db.execute("INSERT INTO shop.customers VALUES (22, 'short-lived', 1)")
    db.execute("DELETE FROM shop.customers WHERE id = 22")  # inserted and deleted between runs
    second = run_and_compare(expected_rows=19)
    assert cdc_pg.parse_lsn(second) > cdc_pg.parse_lsn(first)

    # A column added on the source: the drift policy (evolve) adds it to the Iceberg table.
    db.execute("ALTER TABLE shop.customers ADD COLUMN tier text")
    db.execute("UPDATE shop.customers SET tier = 'gold' WHERE id <= 4")
    db.execute("INSERT INTO shop.customers VALUES (30, 'c30', 9, 'silver')")
    db.execute("DELETE FROM shop.customers WHERE id = 6")
    third = run_and_compare(expected_rows=19)
    columns = ["id", "name", "balance", "tier"]
    table = load_catalog(catalog_uri, None, warehouse).load_table(("shop", "customers"))
    assert "tier" in table.schema().column_names
    assert iceberg_rows(table, columns) == source_rows(db, columns)
    assert dict((r[0], r[3]) for r in iceberg_rows(table, columns))[30] == "silver"
    assert cdc_pg.parse_lsn(third) > cdc_pg.parse_lsn(second)
    assert [r[2] for r in iceberg_rows(table, columns) if r[0] == 21] == [Decimal("3.00")]
