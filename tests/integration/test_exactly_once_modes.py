"""Exactly-once under crashes for each replacing write mode, at each destination.

A flow reads customers from CSV files (files source, one new file per run) and writes them with
``writer.write.mode`` = overwrite, merge or history into Parquet files, PostgreSQL, MariaDB or an
Iceberg table. The worker's own ``execute_job`` runs in this process (real Spark, the real commit
path, the real orchestrator binding the job) and a failpoint stops it as a crash would:

* run 1 loads ids 1-4 and commits;
* run 2 changes ids 3-4 and adds 5-6; the worker dies *between the publish steps* (the data step
  done, the watermark's check-in not) and the orchestrator's redelivered attempt recovers;
* run 3 changes id 6 and adds 7; the worker dies after writing its commit steps, before running
  any; the execution is given up and the flow's next execution finishes them before it reads.

After each run the destination must hold exactly what the mode promises: overwrite the last run's
rows, merge one row per key (the latest), history one current version per key with every earlier
version closed. 0 duplicated, 0 lost, no version added twice. The SIGKILL tests with real
processes (test_exactly_once.py) cover the same commit path for appends; here the steps are the
modes' own (``fs_replace``, ``jdbc_publish`` with overwrite/merge/history, the Iceberg commit).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq
import pytest

from portal.flows import services as flow_services
from portal.orchestration import services
from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import (
    CommitStoreDataset,
    DatasetState,
    ExecutionStatus,
    FlowExecution,
    JobExecution,
    JobStatus,
)
from portal.orchestration.state.commitstore import FailpointCrash, arm, reset_failpoints
from portal.orchestration.worker import executor
from portal.pipeline.destinations.iceberg import load_catalog
from portal.topology import services as topology
from tests.factories import UserFactory
from tests.integration.crash_harness import format_table
from tests.unit.pipeline.conftest import MYSQL_HOST, MYSQL_PORT, mysql

pytestmark = pytest.mark.django_db(transaction=True)

ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
TARGETS = ["parquet", "postgresql", "mariadb", "iceberg"]
MODES = ["overwrite", "merge", "history"]
# What each run brings: (id, name).
RUNS = [
    [(1, "ann"), (2, "bob"), (3, "cid"), (4, "dee")],
    [(3, "cid-2"), (4, "dee-2"), (5, "eve"), (6, "fay")],
    [(6, "fay-3"), (7, "gus")],
]


class Destination:
    """One destination node and how a reader outside Flowport sees its rows."""

    def __init__(self, kind: str, tmp_path: Path, mode: str) -> None:
        self.kind, self.mode, self.tmp = kind, mode, tmp_path
        self.table = f"customers_{mode}"
        self.name = f"lake-{mode}"
        self.pg_db = self.my_db = ""
        if kind == "postgresql":
            self.pg_db = f"fp_modes_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{self.pg_db}"')
        if kind == "mariadb":
            self.my_db = f"fp_modes_{uuid.uuid4().hex[:8]}"
            mysql(f"CREATE DATABASE `{self.my_db}`")

    def node(self) -> dict[str, Any]:
        if self.kind == "parquet":
            return {"name": self.name, "kind": "files", "properties": {"path": str(self.tmp / "lake")}}
        if self.kind == "iceberg":
            uri = f"sqlite:///{self.tmp / 'catalog.db'}"
            return {
                "name": self.name,
                "kind": "iceberg",
                "properties": {"catalog.uri": uri, "warehouse": str(self.tmp / "warehouse")},
            }
        url = (
            f"jdbc:postgresql://127.0.0.1:5432/{self.pg_db}"
            if self.kind == "postgresql"
            else f"jdbc:mariadb://{MYSQL_HOST}:{MYSQL_PORT}/{self.my_db}"
        )
        return {"name": self.name, "kind": "jdbc", "properties": {"url": url}}

    def properties(self) -> dict[str, str]:
        if self.kind == "parquet":
            return {"writer.output.format": "parquet"}
        if self.kind == "iceberg":
            return {"writer.iceberg.table": self.table}
        user = "postgres" if self.kind == "postgresql" else "root"
        return {"writer.jdbc.table": self.table, "writer.jdbc.username": user}

    def rows(self) -> list[tuple[int, str, bool]]:
        """(id, name, current) of every stored row; current is True outside history."""
        history = self.mode == "history"
        if self.kind == "parquet":
            found = sorted(p for p in (self.tmp / "lake").rglob("*.parquet") if _visible(p))
            records = [r for p in found for r in pq.read_table(p).to_pylist()]
        elif self.kind == "iceberg":
            catalog = load_catalog(f"sqlite:///{self.tmp / 'catalog.db'}", None, str(self.tmp / "warehouse"))
            records = catalog.load_table(("modes", self.table)).scan().to_arrow().to_pylist()
        elif self.kind == "postgresql":
            columns = "id, name, is_current, valid_to IS NULL" if history else "id, name, TRUE, TRUE"
            with psycopg.connect(f"postgres://postgres@127.0.0.1:5432/{self.pg_db}") as db:
                got = db.execute(f"SELECT {columns} FROM {self.table}").fetchall()  # noqa: S608
            records = [{"id": i, "name": n, "is_current": c, "open": o} for i, n, c, o in got]
        else:
            columns = "id, name, is_current, valid_to IS NULL" if history else "id, name, 1, 1"
            lines = mysql(f"SELECT {columns} FROM {self.table}", self.my_db).splitlines()  # noqa: S608
            records = [
                {"id": int(i), "name": n, "is_current": c == "1", "open": o == "1"}
                for i, n, c, o in (line.split("\t") for line in lines)
            ]
        out = []
        for r in records:
            current = bool(r.get("is_current", True)) if history else True
            is_open = r["open"] if "open" in r else r.get("valid_to") is None
            if history:
                # A version is current exactly when it is open: is_current and valid_to agree.
                assert current == bool(is_open), f"{self.kind}: version {r} is inconsistent"
            out.append((int(r["id"]), str(r["name"]), current))
        return sorted(out)

    def drop(self) -> None:
        if self.pg_db:
            with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE "{self.pg_db}" WITH (FORCE)')
        if self.my_db:
            mysql(f"DROP DATABASE IF EXISTS `{self.my_db}`")


def _visible(path: Path) -> bool:
    return not any(part.startswith((".", "_")) for part in path.parts[-3:])


def expected(mode: str, runs: int) -> list[tuple[int, str, bool]]:
    """What `runs` runs of RUNS leave at the destination in `mode`."""
    if mode == "overwrite":
        return sorted((i, n, True) for i, n in RUNS[runs - 1])
    latest: dict[int, str] = {}
    versions: list[tuple[int, str, bool]] = []
    for batch in RUNS[:runs]:
        for i, n in batch:
            if i in latest and latest[i] != n:
                versions.remove((i, latest[i], True))
                versions.append((i, latest[i], False))
            if latest.get(i) != n:
                versions.append((i, n, True))
            latest[i] = n
    if mode == "merge":
        return sorted((i, n, True) for i, n in latest.items())
    return sorted(versions)


@pytest.fixture
def failpoints() -> Iterator[None]:
    reset_failpoints()
    yield
    reset_failpoints()


class Story:
    """The flow landing → lake, its executions run in this process."""

    def __init__(self, tmp_path: Path, target: str, mode: str, owner: Any) -> None:
        self.landing = tmp_path / "landing"
        (self.landing / "customers").mkdir(parents=True)
        self.dest = Destination(target, tmp_path, mode)
        self.owner = owner
        source = f"landing-{mode}"
        topology.create_data_node(
            {"name": source, "kind": "files", "properties": {"path": str(self.landing)}}
        )
        topology.create_data_node(self.dest.node())
        from django.conf import settings

        topology.create_executor(
            {"name": f"inproc-{mode}", "technology": "spark-local", "spark_master": settings.SPARK_MASTER,
             "queue": f"it.modes-{mode}"},
            capabilities=[(source, self.dest.name)],
        )  # fmt: skip
        flow = flow_services.create_flow(
            owner=self.owner,
            data={
                "flow_group": "modes",
                "flow_name": f"{target}-{mode}",
                "source": source,
                "destinations": [self.dest.name],
                "paused": True,
                "properties": {
                    "source.files.format": "csv",
                    "source.schema": "id BIGINT, name STRING",
                    "writer.write.mode": mode,
                    "extract.primary.key.fields": "id",
                    **self.dest.properties(),
                },
            },
        )
        self.flow = flow_services.set_paused(flow, False)
        self.files = 0

    def land(self, rows: list[tuple[int, str]]) -> None:
        self.files += 1
        path = self.landing / "customers" / f"batch-{self.files}.csv"
        path.write_text("id,name\n" + "".join(f"{i},{n}\n" for i, n in rows))
        stamp = 1_700_000_000 + self.files
        os.utime(path, (stamp, stamp))

    def start(self) -> JobExecution:
        execution = services.run_now(self.flow, user=self.owner)
        process_actions()
        return execution.jobs.get()

    @staticmethod
    def run(job: JobExecution, *points: str) -> str:
        job.refresh_from_db()
        with arm(*points), contextlib.suppress(FailpointCrash):
            return executor.execute_job(job.pk, job.attempt, job.spec)
        return "crashed"

    @staticmethod
    def redeliver(job: JobExecution) -> JobExecution:
        """What the orchestrator does when the worker's lease lapsed."""
        reset_failpoints()
        JobExecution.objects.filter(pk=job.pk).update(status=JobStatus.ORCHESTRATED, attempt=job.attempt + 1)
        job.refresh_from_db()
        return job

    @staticmethod
    def give_up(job: JobExecution) -> None:
        """The orchestrator gave the dead attempt up: the job and its execution failed."""
        reset_failpoints()
        JobExecution.objects.filter(pk=job.pk).update(status=JobStatus.FAILED)
        FlowExecution.objects.filter(pk=job.execution_id).update(status=ExecutionStatus.FAILED)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("target", TARGETS)
def test_a_crash_between_publish_steps_leaves_each_mode_exact(target, tmp_path, settings, failpoints, capsys):
    settings.FLOWPORT_WORK_DIR = str(tmp_path / "work")
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
    table: list[dict[str, Any]] = []
    problems: list[str] = []
    owner = UserFactory(username="mona")
    for mode in MODES:
        began = time.monotonic()
        story = Story(tmp_path / mode, target, mode, owner)
        try:
            outcomes = []
            story.land(RUNS[0])
            outcomes.append(story.run(story.start()))
            story.land(RUNS[1])
            job = story.start()
            outcomes.append(story.run(job, "after_step:1"))
            outcomes.append(story.run(story.redeliver(job)))
            after_two = story.dest.rows()
            story.land(RUNS[2])
            job = story.start()
            outcomes.append(story.run(job, "after_steps_written"))
            story.give_up(job)
            outcomes.append(story.run(story.start()))
            after_three = story.dest.rows()
            state = DatasetState.objects.get(flow_name=f"{target}-{mode}", dataset_urn="customers")
        finally:
            story.dest.drop()
        want = ["committed", "crashed", "committed", "crashed", "committed"]
        row = {
            "point": f"{target} {mode}",
            "crashed": "after_step:1, after_steps_written",
            "recovered": "yes" if outcomes == want else f"NO {outcomes}",
            "duplicates": len(after_three) - len(set(after_three)),
            "lost": len(set(expected(mode, 3)) - set(after_three)),
            "watermark": "yes" if state.watermark.endswith("batch-3.csv") else f"NO {state.watermark}",
            "seconds": f"{time.monotonic() - began:.0f}",
        }
        table.append(row)
        if after_two != expected(mode, 2):
            problems.append(f"{target} {mode} after run 2: {after_two} != {expected(mode, 2)}")
        if after_three != expected(mode, 3):
            problems.append(f"{target} {mode} after run 3: {after_three} != {expected(mode, 3)}")
        if CommitStoreDataset.objects.filter(dataset_urn="customers").exists():
            problems.append(f"{target} {mode}: commit steps left pending")
            CommitStoreDataset.objects.all().delete()
    shown = format_table(table)
    with capsys.disabled():
        print(f"\n\nWrite modes under crashes ({target}):\n{shown}\n")
    assert not problems, "\n".join(problems) + "\n" + shown
    for row in table:
        assert (row["recovered"], row["duplicates"], row["lost"], row["watermark"]) == ("yes", 0, 0, "yes"), (
            shown
        )
