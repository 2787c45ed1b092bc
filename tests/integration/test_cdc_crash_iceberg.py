"""A cdc flow into an Iceberg table merged by key; the worker is killed (SIGKILL) at each commit
step, as in the change log's story (:mod:`tests.integration.test_cdc_crash`: real Celery workers,
a real scheduler redelivering the dead worker's attempt, a private ``wal_level=logical`` server).
After every scenario the table equals the source row by row (0 lost, no key twice), each execution
is committed into the table once (one append of its rows: 0 duplicates), the table's last commit
carries the position the state store holds, and the slot is released up to it."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from portal.flows import services as flow_services
from portal.orchestration.models import CommitStoreDataset, DatasetState, ExecutionStatus
from portal.pipeline.cdc import pg as cdc_pg
from portal.pipeline.destinations.iceberg import load_catalog
from portal.topology import services as topology
from tests.builders.cdc import POINTS, crash_a_run
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
from tests.pg_logical import logical_pg  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def committed_position(table: Any, job_name: str) -> str | None:
    """The position the table's last commit of the job checked in (a run with no change commits the
    moved position alone, without a snapshot)."""
    found = table.properties.get(f"flowport.watermark.{job_name}.shop.customers")
    return json.loads(found)["watermark"] if found else None


def appends_of(table: Any, execution_id: int) -> int:
    """How many times the execution's rows were appended to the table (its commits)."""
    return sum(
        1
        for s in table.metadata.snapshots
        if s.summary is not None
        and s.summary.operation.value == "append"
        and s.summary.additional_properties.get("flowport.execution-id") == str(execution_id)
    )


@pytest.mark.timeout(1500)
def test_sigkill_at_each_commit_step_merges_each_change_into_iceberg_once(
    shop,
    tmp_path: Path,
    request,
    capsys,
):
    env, logs = request.getfixturevalue("eo_env"), request.getfixturevalue("eo_dir") / "logs"
    request.getfixturevalue("eo_scheduler")
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
        {"name": "eo-ingest", "technology": "spark-local", "spark_master": "local[2]", "queue": QUEUE},
        capabilities=[("shopdb", "lakehouse")],
    )
    flow = flow_services.create_flow(
        owner=UserFactory(username="odile"),
        data={
            "flow_group": "eo",
            "flow_name": "customers-ice",
            "source": "shopdb",
            "destinations": ["lakehouse"],
            "properties": {
                "source.class": "portal.pipeline.sources.cdc.CdcSource",
                "source.cdc.tables": "shop.customers",
                "writer.iceberg.table": "customers",
                "writer.write.mode": "merge",
                "extract.primary.key.fields": "id",
                "extract.delta.fields": "_cdc_position",
                "writer.merge.delete.column": "_cdc_deleted",
            },
            "paused": True,
        },
    )
    flow = flow_services.set_paused(flow, False)
    db = shop["db"]
    workers = Workers(env, logs)
    rows, next_id = [], 11
    try:
        workers.fill("")
        workers.wait_ready()
        for scenario in POINTS:
            began = time.monotonic()
            execution, died = crash_a_run(db, workers, flow, scenario[0], next_id)
            next_id += 1
            table = load_catalog(catalog_uri, None, warehouse).load_table(("eo", "customers"))
            stored = sorted(
                ((r["id"], r["name"], r["balance"]) for r in table.scan().to_arrow().to_pylist()),
                key=lambda r: r[0],
            )
            source = [
                (i, n, Decimal(b))
                for i, n, b in db.execute("SELECT * FROM shop.customers ORDER BY id").fetchall()
            ]
            state = DatasetState.objects.get(flow_id=flow.pk, dataset_urn="shop.customers")
            mark = state.watermark
            slot = cdc_pg.state(db, cdc_pg.slot_name(flow.pk, "eo", "customers-ice"))
            rows.append(
                {
                    "point": scenario[0],
                    "crashed": "SIGKILL" if died else "no",
                    "recovered": f"yes ({how(execution)})"
                    if execution.status == ExecutionStatus.COMMITTED
                    else f"NO: {execution.status} {execution.message[:80]}",
                    "duplicates": appends_of(table, execution.execution_id) - 1,
                    "lost": "0" if stored == source else "ROWS DIFFER",
                    "watermark": mark,
                    "in table": "yes" if committed_position(table, state.job_name) == mark else "NO",
                    "released": "yes"
                    if slot is not None and slot.confirmed == cdc_pg.parse_lsn(mark)
                    else "NO",
                    "seconds": f"{time.monotonic() - began:.0f}",
                }
            )
            assert not CommitStoreDataset.objects.exists()
    finally:
        workers.stop()
        printed = format_table(rows) + "".join(
            f"\n{r['point']}: the position in the table's commit {r['in table']}, the slot released {r['released']}"
            for r in rows
        )
        with capsys.disabled():
            print(
                f"\n\nCDC into Iceberg: SIGKILL at each commit step ({workers.count} worker processes):\n{printed}\n"
            )
    assert len(rows) == len(POINTS), printed
    for row in rows:
        assert row["crashed"] == "SIGKILL", printed
        assert row["recovered"].startswith("yes"), printed
        assert (row["duplicates"], row["lost"], row["in table"], row["released"]) == (0, "0", "yes", "yes"), (
            printed
        )
