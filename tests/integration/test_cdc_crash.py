"""A cdc flow's worker is killed (SIGKILL) at each commit step: real Celery
workers run the flow on Spark from a private ``wal_level=logical`` PostgreSQL into a change log of
Parquet files, a real scheduler redelivers the attempt of the dead worker, and another worker
recovers. The table's snapshot is read in chunks of 4 rows, one a run, so the first scenarios crash
in the middle of it. After every scenario the change log holds each change once (0 duplicates: no
(position, key, operation) twice; a key change puts a delete of the old key and the new row at one
position, so a position alone does not identify a change), and replaying it gives the source table row by row (0 lost). The harness (two warm workers
armed through failpoint files, a broker of its own) is the files exactly-once story's."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import pytest

from portal.flows import services as flow_services
from portal.orchestration.models import CommitStoreDataset, DatasetState, ExecutionStatus
from portal.pipeline.cdc import pg as cdc_pg
from portal.pipeline.cdc import snapshot as cdc_snapshot
from portal.topology import services as topology
from tests.builders.cdc import POINTS, change_log, crash_a_run, replay
from tests.builders.cdc import shop as shop  # fixture
from tests.factories import UserFactory
from tests.integration.crash_harness import (  # noqa: F401 (fixtures)
    QUEUE,
    Workers,
    _relay_through_the_stack_broker,
    eo_dir,
    eo_env,
    eo_scheduler,
    finished,
    format_table,
    how,
)
from tests.pg_logical import logical_pg, own_database  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def change_identity(row: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies one change in the log: its position, its key and its operation (a key
    change puts a delete of the old key and the new row at one position)."""
    return (row["_cdc_position"], row["id"], row["_cdc_op"])


def duplicates(log: list[dict[str, Any]]) -> int:
    """Changes the log holds more than once."""
    return len(log) - len({change_identity(row) for row in log})


def matches(replayed: list[tuple[Any, ...]], source: list[tuple[Any, ...]], snapshot: Any) -> bool:
    """The change log holds the source: all of it once the snapshot is done; in the middle of it,
    every row up to the last key read, and only rows as the source has them beyond it (the ones
    the stream delivered)."""
    if snapshot is None:
        return replayed == source
    upto = int(snapshot.after[0]) if snapshot.after else 0
    got, want = {r[0]: r for r in replayed}, {r[0]: r for r in source}
    return all(got.get(k) == row for k, row in want.items() if k <= upto) and all(
        want.get(k) == row for k, row in got.items()
    )


@pytest.mark.timeout(1500)
def test_sigkill_at_each_commit_step_leaves_each_change_once(shop, tmp_path, request, capsys):
    env, logs = request.getfixturevalue("eo_env"), request.getfixturevalue("eo_dir") / "logs"
    request.getfixturevalue("eo_scheduler")
    lake = tmp_path / "lake"
    lake.mkdir()
    topology.create_data_node(
        {"name": "shopdb", "kind": "jdbc", "properties": {"url": shop["url"], "user": "postgres"}}
    )
    topology.create_data_node({"name": "lake", "kind": "files", "properties": {"path": str(lake)}})
    topology.create_executor(
        {"name": "eo-ingest", "technology": "spark-local", "spark_master": "local[2]", "queue": QUEUE},
        capabilities=[("shopdb", "lake")],
    )
    flow = flow_services.create_flow(
        owner=UserFactory(username="olivia"),
        data={
            "flow_group": "eo",
            "flow_name": "customers-log",
            "source": "shopdb",
            "destinations": ["lake"],
            "properties": {
                "source.class": "portal.pipeline.sources.cdc.CdcSource",
                "source.cdc.tables": "shop.customers",
                "writer.output.format": "parquet",
                "source.cdc.snapshot.chunk.size": "4",
                "source.cdc.snapshot.chunks.per.run": "1",
            },
            "paused": True,
        },
    )
    flow = flow_services.set_paused(flow, False)
    db, folder = shop["db"], lake / "eo" / "customers-log" / "shop.customers"
    workers = Workers(env, logs)
    rows, next_id = [], 11
    try:
        workers.fill("")
        workers.wait_ready()
        for scenario in POINTS:
            began = time.monotonic()
            execution, died = crash_a_run(db, workers, flow, scenario[0], next_id)
            next_id += 1
            log = change_log(folder)
            source = [
                (i, n, Decimal(b))
                for i, n, b in db.execute("SELECT * FROM shop.customers ORDER BY id").fetchall()
            ]
            mark = DatasetState.objects.get(flow_id=flow.pk, dataset_urn="shop.customers").watermark
            snapshot = cdc_snapshot.split(mark)[1]
            mark = cdc_snapshot.stream_position(mark) or ""
            slot = cdc_pg.state(db, cdc_pg.slot_name(flow.pk, "eo", "customers-log"))
            rows.append(
                {
                    "point": scenario[0],
                    "crashed": "SIGKILL" if died else "no",
                    "recovered": f"yes ({how(execution)})"
                    if execution.status == ExecutionStatus.COMMITTED
                    else f"NO: {execution.status} {execution.message[:80]}",
                    "duplicates": duplicates(log),
                    "lost": "0" if matches(replay(log), source, snapshot) else "ROWS DIFFER",
                    "watermark": mark,
                    "snapshot": f"after {list(snapshot.after or [])}" if snapshot else "done",
                    "released": "yes"
                    if slot is not None and slot.confirmed == cdc_pg.parse_lsn(mark)
                    else "NO",
                    "seconds": f"{time.monotonic() - began:.0f}",
                }
            )
            assert not CommitStoreDataset.objects.exists()
    finally:
        workers.stop()
        table = format_table(rows)
        with capsys.disabled():
            print(f"\n\nCDC: SIGKILL at each commit step ({workers.count} worker processes):\n{table}\n")
    assert len(rows) == len(POINTS), table
    for row in rows:
        assert row["crashed"] == "SIGKILL", table
        assert row["recovered"].startswith("yes"), table
        assert (row["duplicates"], row["lost"], row["released"]) == (0, "0", "yes"), table
    assert cdc_pg.parse_lsn(rows[-1]["watermark"]) > cdc_pg.parse_lsn(rows[0]["watermark"])
    assert rows[0]["snapshot"] != "done" and rows[-1]["snapshot"] == "done", table
