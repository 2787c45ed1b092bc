"""Re-running a committed execution, and backfilling part of an appending dataset, read rows again
without adding them twice: a files dataset without partitions swaps the files the re-read loads
published for the new ones; a PostgreSQL table deletes the range first. Real Spark, the real
orchestrator binding the jobs, the worker's execute_job in this process."""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq
import pytest
from django.core.exceptions import ValidationError

from portal.flows import services as flow_services
from portal.orchestration import services
from portal.orchestration.control import replays
from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import DatasetState, ExecutionStatus, FlowExecution
from portal.orchestration.worker import executor
from portal.topology import services as topology
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
MTIME = 1_700_000_000


def _run(execution: FlowExecution) -> FlowExecution:
    """Launch an execution and run its job in this process, as a worker would."""
    process_actions()
    job = execution.jobs.get()
    assert executor.execute_job(job.pk, job.attempt, job.spec) == "committed", job.message
    process_actions()
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.COMMITTED, execution.message
    return execution


def _iso(stamp: int) -> str:
    return dt.datetime.fromtimestamp(stamp, dt.UTC).isoformat().replace("+00:00", "Z")


class FilesFlow:
    def __init__(self, tmp_path: Path, owner: Any, settings: Any) -> None:
        settings.FLOWPORT_WORK_DIR = str(tmp_path / "work")
        settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
        self.landing, self.lake = tmp_path / "landing", tmp_path / "lake"
        (self.landing / "orders").mkdir(parents=True)
        topology.create_data_node(
            {"name": "drop", "kind": "files", "properties": {"path": str(self.landing)}}
        )
        topology.create_data_node({"name": "lake", "kind": "files", "properties": {"path": str(self.lake)}})
        topology.create_executor(
            {"name": "inproc", "technology": "spark-local", "spark_master": settings.SPARK_MASTER,
             "queue": "it.replays"},
            capabilities=[("drop", "lake")],
        )  # fmt: skip
        flow = flow_services.create_flow(
            owner=owner,
            data={
                "flow_group": "shop",
                "flow_name": "orders",
                "source": "drop",
                "destinations": ["lake"],
                "paused": True,
                "properties": {
                    "source.files.format": "csv",
                    "source.schema": "id BIGINT, item STRING",
                    "writer.output.format": "parquet",
                },
            },
        )
        self.flow = flow_services.set_paused(flow, False)
        self.owner = owner
        self.files = 0
        self.next_id = 1

    def land(self, rows: int) -> int:
        """A new source file of `rows` orders; returns its modification time."""
        self.files += 1
        ids = range(self.next_id, self.next_id + rows)
        self.next_id += rows
        path = self.landing / "orders" / f"orders-{self.files}.csv"
        path.write_text("id,item\n" + "".join(f"{i},item-{i}\n" for i in ids))
        stamp = MTIME + 60 * self.files
        os.utime(path, (stamp, stamp))
        return stamp

    def run(self, **backfill: Any) -> FlowExecution:
        return _run(services.run_now(self.flow, user=self.owner, backfill=backfill or None))

    def ids(self) -> Counter[int]:
        files = [p for p in (self.lake / "shop" / "orders" / "orders").rglob("*.parquet")]
        visible = [p for p in files if not any(part.startswith((".", "_")) for part in p.parts[-2:])]
        return Counter(i for p in visible for i in pq.read_table(p).column("id").to_pylist())


def test_re_running_a_committed_execution_of_a_files_flow_replaces_what_it_reads_again(tmp_path, settings):
    owner = UserFactory(username="rhea")
    story = FilesFlow(tmp_path, owner, settings)
    story.land(3)
    story.run()
    story.land(2)
    story.land(2)  # the second run loads two files
    second = story.run()
    story.land(3)
    story.run()
    everything = Counter(range(1, 11))
    assert story.ids() == everything

    # Re-run the second execution: its two files are read again and replace what it published.
    rerun = _run(replays.replay(second, user=owner))
    assert rerun.trigger == FlowExecution.Trigger.BACKFILL
    assert story.ids() == everything, "a re-run added rows again"
    # Re-running it once more replaces the first re-run's files, not the original's (gone now).
    _run(replays.replay(second, user=owner))
    assert story.ids() == everything
    # The stored watermark stays where the last scheduled run left it.
    state = DatasetState.objects.get(flow_name="orders", dataset_urn="orders")
    assert state.watermark.endswith("orders-4.csv")

    # A partial backfill whose high falls inside the second load (its first file's time) reads
    # that load whole and replaces it; then one of the third load alone.
    partial = story.run(orders={"low": _iso(MTIME + 60), "high": _iso(MTIME + 120)})
    assert partial.jobs.get().processed_count == 4
    assert story.ids() == everything
    story.run(orders={"low": _iso(MTIME + 180), "high": _iso(MTIME + 240)})
    assert story.ids() == everything

    # An execution that loaded nothing has nothing to read again.
    idle = story.run()
    with pytest.raises(ValidationError, match="loaded no records"):
        replays.replay(idle, user=owner)


@pytest.fixture
def shop_databases():
    suffix = uuid.uuid4().hex[:8]
    source, target = f"fp_replay_src_{suffix}", f"fp_replay_dst_{suffix}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{source}"')
        admin.execute(f'CREATE DATABASE "{target}"')
    yield source, target
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{source}" WITH (FORCE)')
        admin.execute(f'DROP DATABASE "{target}" WITH (FORCE)')


def test_re_running_a_committed_execution_into_postgresql_replaces_its_range(
    tmp_path, settings, shop_databases
):
    settings.FLOWPORT_WORK_DIR = str(tmp_path / "work")
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
    source, target = shop_databases
    owner = UserFactory(username="pia")
    source_url = f"postgres://postgres@127.0.0.1:5432/{source}"
    with psycopg.connect(source_url, autocommit=True) as db:
        db.execute("CREATE TABLE orders (id bigint PRIMARY KEY, item text, updated_at timestamptz NOT NULL)")
        db.execute(
            "INSERT INTO orders SELECT g, 'item-' || g, timestamptz '2025-01-01 00:00:00+00' + g * "
            "interval '1 minute' FROM generate_series(1, 30) g"
        )
    for name, database in (("shopdb", source), ("warehouse", target)):
        topology.create_data_node(
            {
                "name": name,
                "kind": "jdbc",
                "properties": {"url": f"jdbc:postgresql://127.0.0.1:5432/{database}", "user": "postgres"},
            }
        )
    topology.create_executor(
        {"name": "inproc", "technology": "spark-local", "spark_master": settings.SPARK_MASTER,
         "queue": "it.replays"},
        capabilities=[("shopdb", "warehouse")],
    )  # fmt: skip
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "shop",
            "flow_name": "orders-db",
            "source": "shopdb",
            "destinations": ["warehouse"],
            "paused": True,
            "properties": {
                "source.jdbc.tables": "orders",
                "extract.delta.fields": "updated_at",
                "writer.jdbc.table": "orders_copy",
            },
        },
    )
    flow = flow_services.set_paused(flow, False)
    _run(services.run_now(flow, user=owner))
    with psycopg.connect(source_url, autocommit=True) as db:
        db.execute(
            "INSERT INTO orders SELECT g, 'item-' || g, timestamptz '2025-02-01 00:00:00+00' + g * "
            "interval '1 minute' FROM generate_series(31, 45) g"
        )
    second = _run(services.run_now(flow, user=owner))
    target_url = f"postgres://postgres@127.0.0.1:5432/{target}"

    def copies() -> Counter[int]:
        with psycopg.connect(target_url) as db:
            return Counter(r[0] for r in db.execute("SELECT id FROM orders_copy").fetchall())

    assert copies() == Counter(range(1, 46))
    rerun = _run(replays.replay(second, user=owner))
    assert rerun.backfill["orders"]["low"] is not None  # the second run's range, not everything
    assert rerun.jobs.get().processed_count == 15
    assert copies() == Counter(range(1, 46)), "a re-run added rows again"
