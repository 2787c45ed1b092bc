"""A cdc flow forks one PostgreSQL table's changes to two destinations: a PostgreSQL table merged by
key and a Parquet change log. The warehouse table is made to refuse the run's rows for a while (a
CHECK constraint the new rows break: a real failure of its publish), then recovers. Each destination
keeps its own log position: the change log goes on while the warehouse fails and is never sent a
change twice, the warehouse reads on from its own last committed position once it recovers, both
end equal to the source row by row, and the slot's confirmed_flush_lsn never passes the failing
destination's position (the server keeps the log it still needs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from portal.flows import services as flow_services
from portal.orchestration import services
from portal.orchestration.models import DatasetState, ExecutionStatus, JobExecution, JobStatus
from portal.pipeline.cdc import pg as cdc_pg
from portal.topology import services as topology
from tests.builders.cdc import (
    change_log,
    replay,
    warehouse,  # noqa: F401 (fixture)
)
from tests.builders.cdc import shop as shop
from tests.builders.queues import INGEST_QUEUE
from tests.builders.stack import finished
from tests.pg_logical import logical_pg  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

MERGED = {
    "destination.warehouse.writer.jdbc.table": "customers",
    "destination.warehouse.writer.write.mode": "merge",
    "destination.warehouse.extract.primary.key.fields": "id",
    "destination.warehouse.extract.delta.fields": "_cdc_position",
    "destination.warehouse.writer.merge.delete.column": "_cdc_deleted",
    "destination.lake.writer.output.format": "parquet",
}


def table(db: Any, name: str) -> list[tuple[Any, ...]]:
    return db.execute(f"SELECT id, name, balance FROM {name} ORDER BY id").fetchall()  # noqa: S608


def position(flow: Any, destination: str) -> int:
    state = DatasetState.objects.get(
        flow_id=flow.pk, dataset_urn="shop.customers", job_name__endswith=f"-to-{destination}"
    )
    return cdc_pg.parse_lsn(state.watermark)


def test_a_failing_destination_keeps_its_position_and_holds_the_slot_back_not_the_others(
    shop,
    warehouse,  # noqa: F811
    tmp_path: Path,
    worker,
    scheduler,
):
    owner = get_user_model().objects.create(username="fatima")
    lake = tmp_path / "lake"
    lake.mkdir()
    topology.create_data_node(
        {"name": "shopdb", "kind": "jdbc", "properties": {"url": shop["url"], "user": "postgres"}}
    )
    topology.create_data_node(
        {"name": "warehouse", "kind": "jdbc", "properties": {"url": warehouse["url"], "user": "postgres"}}
    )
    topology.create_data_node({"name": "lake", "kind": "files", "properties": {"path": str(lake)}})
    topology.create_executor(
        {"name": "ingest", "technology": "spark-local", "spark_master": "local[2]", "queue": INGEST_QUEUE},
        capabilities=[("shopdb", "warehouse"), ("shopdb", "lake")],
    )
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "shop",
            "flow_name": "customers-fork",
            "source": "shopdb",
            "destinations": ["warehouse", "lake"],
            "properties": {
                "source.class": "portal.pipeline.sources.cdc.CdcSource",
                "source.cdc.tables": "shop.customers",
                **MERGED,
            },
            "paused": True,  # the story runs it itself
        },
    )
    flow = flow_services.set_paused(flow, False)
    db, copy = shop["db"], warehouse["db"]
    folder = lake / "shop" / "customers-fork" / "shop.customers"
    slot = cdc_pg.slot_name(flow.pk, "shop", "customers-fork")

    def confirmed() -> int:
        state = cdc_pg.state(db, slot)
        assert state is not None
        return state.confirmed

    def log_is_the_source() -> None:
        log = change_log(folder)
        positions = [r["_cdc_position"] for r in log]
        assert len(positions) == len(set(positions)), "a change reached the change log twice"
        assert replay(log) == [(i, n, b) for i, n, b in table(db, "shop.customers")]

    first = finished(services.run_now(flow, user=owner), timeout=300)
    assert first.status == ExecutionStatus.COMMITTED, first.message
    assert table(copy, "customers") == table(db, "shop.customers")
    log_is_the_source()
    assert confirmed() == min(position(flow, "warehouse"), position(flow, "lake"))

    # The warehouse refuses the next rows: its publish fails, the change log's goes on.
    copy.execute("ALTER TABLE customers ADD CONSTRAINT no_new_customers CHECK (id <= 10) NOT VALID")
    held = position(flow, "warehouse")
    for round_ in range(2):
        db.execute("INSERT INTO shop.customers VALUES (%s, 'new', 1)", (11 + round_,))
        db.execute("UPDATE shop.customers SET balance = balance + 1, name = name || '+' WHERE id % 3 = 0")
        db.execute("DELETE FROM shop.customers WHERE id = (SELECT min(id) FROM shop.customers)")
        failed = finished(services.run_now(flow, user=owner), timeout=300)
        assert failed.status == ExecutionStatus.FAILED, failed.message
        jobs = dict(JobExecution.objects.filter(execution=failed).values_list("job_name", "status"))
        assert sorted(jobs.values()) == [JobStatus.COMMITTED, JobStatus.FAILED], jobs
        assert position(flow, "warehouse") == held  # its position did not move
        assert position(flow, "lake") > held  # the other destination went on
        log_is_the_source()  # and got each change once
        assert confirmed() <= held  # the log the warehouse still needs is kept

    # The warehouse recovers: it reads on from its own position; the change log is not sent again.
    copy.execute("ALTER TABLE customers DROP CONSTRAINT no_new_customers")
    db.execute("UPDATE shop.customers SET name = 'late' WHERE id = 12")
    recovered = finished(services.run_now(flow, user=owner), timeout=300)
    assert recovered.status == ExecutionStatus.COMMITTED, recovered.message
    assert table(copy, "customers") == table(db, "shop.customers")
    log_is_the_source()
    assert position(flow, "warehouse") > held
    assert confirmed() == min(position(flow, "warehouse"), position(flow, "lake"))
