"""A data team follows a PostgreSQL table by its log, through the portal: the source is a
private server with ``wal_level=logical``; a real worker runs the cdc flow on Spark into a PostgreSQL
table merged by key. Inserts, updates and deletes between runs reach the destination, which matches
the source row by row after every run; a run whose worker died before the commit reads its changes
again and applies them once; deleting the flow drops its replication slot and publication."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.contrib.auth import get_user_model

from portal.flows import services as flow_services
from portal.orchestration import services
from portal.orchestration.models import DatasetState, ExecutionStatus
from portal.pipeline.cdc import pg as cdc_pg
from portal.topology import services as topology
from tests.builders.cdc import warehouse as warehouse  # fixture
from tests.builders.queues import INGEST_QUEUE
from tests.builders.stack import finished
from tests.pg_logical import logical_pg, own_database  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

COLUMNS = "id, name, balance, vip"


@pytest.fixture
def shop(logical_pg: str) -> Iterator[dict[str, Any]]:  # noqa: F811
    with own_database(
        logical_pg,
        "CREATE SCHEMA shop",
        "CREATE TABLE shop.customers (id int PRIMARY KEY, name text, balance numeric(10,2), vip boolean)",
        "INSERT INTO shop.customers SELECT g, 'c' || g, g * 1.5, g % 3 = 0 FROM generate_series(1, 20) g",
    ) as found:
        yield found


def rows(db: psycopg.Connection, table: str) -> list[tuple[Any, ...]]:
    return db.execute(f"SELECT {COLUMNS} FROM {table} ORDER BY id").fetchall()  # noqa: S608 - test names


def test_a_cdc_flow_keeps_a_postgresql_table_equal_to_its_source(shop, warehouse, worker, scheduler):
    owner = get_user_model().objects.create(username="olivia")
    topology.create_data_node(
        {"name": "shopdb", "kind": "jdbc", "properties": {"url": shop["url"], "user": "postgres"}}
    )
    topology.create_data_node(
        {"name": "warehouse", "kind": "jdbc", "properties": {"url": warehouse["url"], "user": "postgres"}}
    )
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[2]", "queue": INGEST_QUEUE},
        capabilities=[("shopdb", "warehouse")],
    )
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "shop",
            "flow_name": "customers-cdc",
            "source": "shopdb",
            "destinations": ["warehouse"],
            "properties": {
                "source.class": "portal.pipeline.sources.cdc.CdcSource",
                "source.cdc.tables": "shop.customers",
                "writer.jdbc.table": "customers",
                "writer.write.mode": "merge",
                "extract.primary.key.fields": "id",
                "extract.delta.fields": "_cdc_position",
                "writer.merge.delete.column": "_cdc_deleted",
            },
            "paused": True,  # the story runs it itself
        },
    )
    flow = flow_services.set_paused(flow, False)
    db, copy = shop["db"], warehouse["db"]
    slot = cdc_pg.slot_name(flow.pk, "shop", "customers-cdc")

    first = finished(services.run_now(flow, user=owner), timeout=240)
    assert first.status == ExecutionStatus.COMMITTED, first.message
    assert rows(copy, "customers") == rows(db, "shop.customers") and len(rows(copy, "customers")) == 20
    position = DatasetState.objects.get(flow_id=flow.pk, dataset_urn="shop.customers").watermark
    assert cdc_pg.parse_lsn(position) > 0  # the log position is the dataset's watermark
    released = cdc_pg.state(db, slot)  # acknowledged as soon as the destination committed
    assert released is not None and released.confirmed == cdc_pg.parse_lsn(position)

    db.execute("INSERT INTO shop.customers VALUES (21, 'c21', 3, true)")
    db.execute("UPDATE shop.customers SET balance = balance * 2, name = name || '!' WHERE id % 4 = 0")
    db.execute("DELETE FROM shop.customers WHERE id IN (3, 7)")
    with db.transaction():  # one transaction: the key changes twice, the last state wins
        db.execute("UPDATE shop.customers SET vip = NOT vip WHERE id = 5")
        db.execute("DELETE FROM shop.customers WHERE id = 5")
        db.execute("INSERT INTO shop.customers VALUES (5, 'c5 again', 0, NULL)")
    second = finished(services.run_now(flow, user=owner), timeout=240)
    assert second.status == ExecutionStatus.COMMITTED, second.message
    assert rows(copy, "customers") == rows(db, "shop.customers")
    moved = DatasetState.objects.get(flow_id=flow.pk, dataset_urn="shop.customers").watermark
    assert cdc_pg.parse_lsn(moved) > cdc_pg.parse_lsn(position)

    # The slot is released up to what was committed right after each publish, never further.
    state = cdc_pg.state(db, slot)
    assert state is not None and state.confirmed == cdc_pg.parse_lsn(moved)
    db.execute("UPDATE shop.customers SET name = 'late' WHERE id = 1")
    third = finished(services.run_now(flow, user=owner), timeout=240)
    assert third.status == ExecutionStatus.COMMITTED, third.message
    assert rows(copy, "customers") == rows(db, "shop.customers")
    last = DatasetState.objects.get(flow_id=flow.pk, dataset_urn="shop.customers").watermark
    state = cdc_pg.state(db, slot)
    assert state is not None and state.confirmed == cdc_pg.parse_lsn(last) > cdc_pg.parse_lsn(moved)

    flow_services.delete_flow(flow)
    assert cdc_pg.state(db, slot) is None
    assert db.execute("SELECT count(*) FROM pg_publication WHERE pubname = %s", (slot,)).fetchone() == (0,)
