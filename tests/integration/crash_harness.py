"""Crash-injection harness for the exactly-once tests.

* A source of records: JSON-lines files under `<landing>/<dataset>/`, one
  `{"id": n}` per line, with strictly increasing modification times (the
  files source orders by mtime, then name).
* `RecordingPipeline`: the real `run_job` (real Spark, in this process)
  that remembers the JobSpecs it ran, for the in-process tests.
* Checks: the published multiset of ids against the source, the watermark
  against the source max, and the crash table.
* Real processes for the SIGKILL tests: a broker DB of our own (11), a
  worker armed through FLOWPORT_FAILPOINT_FILE.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq
import pytest
import redis

from portal.flows import services as flow_services
from portal.orchestration import services
from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import (
    CommitStoreDataset,
    DatasetState,
    ExecutionStatus,
    FlowExecution,
    JobExecution,
    JobState,
    JobStatus,
)
from portal.orchestration.state.commitstore import FailpointCrash, arm, reset_failpoints
from portal.orchestration.worker import executor
from portal.pipeline import fs, run_job
from portal.pipeline.destinations.iceberg import load_catalog
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.sources.files import file_watermark
from portal.topology import services as topology
from tests.builders.servers import MYSQL_HOST, MYSQL_PORT, mysql
from tests.integration.stack import VENV_BIN, Proc, process_env, relay_through, start_scheduler, wait_until
from tests.ports import own_redis_url

CRASH_BROKER_URL = own_redis_url("TEST_REDIS_DB_CRASH", 11)
MTIME_BASE = 1_700_000_000
QUEUE = "eo.ingest"  # the crash stories' executor queue


class Landing:
    """The source: datasets of JSON-lines files with increasing mtimes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.next_id = 1
        self.files = 0
        root.mkdir(parents=True, exist_ok=True)

    def add(self, dataset: str, rows: int) -> list[int]:
        ids = list(range(self.next_id, self.next_id + rows))
        self.next_id += rows
        self.files += 1
        path = self.root / dataset / f"batch-{self.files:05d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps({"id": i, "dataset": dataset}) + "\n" for i in ids))
        stamp = MTIME_BASE + self.files
        os.utime(path, (stamp, stamp))
        return ids

    def datasets(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    def ids(self, dataset: str | None = None) -> list[int]:
        return read_ids(self.root / dataset if dataset else self.root)

    def max_watermark(self, dataset: str) -> str:
        return max(file_watermark(f) for f in fs.list_files(str(self.root / dataset)))


def read_ids(folder: Path) -> list[int]:
    ids: list[int] = []
    for path in sorted(folder.rglob("*.json")) if folder.exists() else []:
        ids.extend(json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip())
    return sorted(ids)


def compare(source: list[int], published: list[int]) -> tuple[int, int]:
    """(duplicates, lost): extra copies published, source ids never published."""
    have, want = Counter(published), Counter(source)
    duplicates = sum((have - want).values())
    lost = sum((want - have).values())
    return duplicates, lost


COLUMNS = {
    "point": "crash point",
    "crashed": "crashed",
    "recovered": "recovered?",
    "duplicates": "duplicates",
    "lost": "lost",
    "watermark": "watermark = source max",
    "staging left": "staging tables left",
    "seconds": "seconds",
}


def format_table(rows: list[dict[str, Any]]) -> str:
    keys = [k for k in COLUMNS if any(k in r for r in rows)] or list(COLUMNS)[:6]
    header = [COLUMNS[k] for k in keys]
    lines = [[str(r.get(k, "")) for k in keys] for r in rows]
    widths = [max([len(h), *(len(line[i]) for line in lines)]) for i, h in enumerate(header)]
    out = [" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    out.append("-+-".join("-" * w for w in widths))
    out.extend(" | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)
    return "\n".join(out)


# --- the pipeline, recorded ------------------------------------------------------------------


class RecordingPipeline:
    """The real `portal.pipeline.run_job` on the worker's SparkSession, with
    each JobSpec it was given kept for the test to read."""

    def __init__(self) -> None:
        self.specs: list[JobSpec] = []

    def __call__(self, spark: Any, jobspec: JobSpec, **options: Any) -> list[dict[str, Any]]:
        self.specs.append(jobspec)
        return run_job(spark, jobspec, **options)


def job_spec(
    landing: Path, publish: Path, work: Path, execution_id: int, job_name: str = "eo_job", **props: str
) -> dict[str, Any]:
    """The JobSpec the orchestrator would bind for the flow eo/landing-to-lake (files node
    `landing` at `landing` → files node `lake` at `publish`'s grandparent): the worker's
    security check compares it with those nodes."""
    lake = publish.parent.parent
    return {
        "job_name": job_name,
        "flow_group": "eo",
        "flow_name": "landing-to-lake",
        "execution_id": execution_id,
        "work_dir": str(work),
        "properties": {
            "flowport.hop.source": "landing",
            "flowport.hop.source.kind": "files",
            "flowport.hop.source.path": str(landing),
            "flowport.hop.destination": "lake",
            "flowport.hop.destination.kind": "files",
            "flowport.hop.destination.path": str(lake),
            "source.class": "portal.pipeline.sources.files.FileSource",
            "source.files.path": str(landing),
            "source.files.format": "json",
            "source.files.workunit.max.files": "1",
            "writer.output.format": "json",
            "data.publisher.final.dir": str(publish),
            "job.commit.policy": "partial",
            **props,
        },
    }


# --- running the worker in-process ------------------------------------------------------------


class World:
    """A landing folder, a lake, a work dir, and the worker's `execute_job`
    run in-process (patch `executor.run_job` with a RecordingPipeline first)."""

    def __init__(self, tmp_path: Path, pipeline: RecordingPipeline) -> None:
        """Set ``settings.FLOWPORT_WORK_DIR`` (the fixture's ``settings``) before: the flow's work
        folder is ``<FLOWPORT_WORK_DIR>/eo/landing-to-lake``, as the orchestrator binds it."""
        from django.conf import settings

        from portal.topology import services as topology
        from tests.factories import FlowConfigFactory, UserFactory

        self.landing = Landing(tmp_path / "landing")
        self.publish = tmp_path / "lake" / "eo" / "landing-to-lake"  # the flow's namespace in `lake`
        self.work = Path(settings.FLOWPORT_WORK_DIR) / "eo" / "landing-to-lake"
        for name, path in (("landing", self.landing.root), ("lake", tmp_path / "lake")):
            topology.create_data_node({"name": name, "kind": "files", "properties": {"path": str(path)}})
        FlowConfigFactory(
            owner=UserFactory(username="eo-owner"),
            flow_group="eo",
            flow_name="landing-to-lake",
            source="landing",
            destinations=["lake"],
            schedule="",
        )
        self.pipeline = pipeline
        self.execution_id = 1000
        self.props: dict[str, str] = {"commit.step.max.redo": "2"}

    def new_job(self) -> JobExecution:
        self.execution_id += 1
        spec = job_spec(self.landing.root, self.publish, self.work, self.execution_id, **self.props)
        execution = FlowExecution.objects.create(
            flow_group="eo", flow_name="landing-to-lake", execution_id=self.execution_id, trigger="RUN_NOW"
        )
        return JobExecution.objects.create(
            execution=execution,
            job_name=spec["job_name"],
            job_group="eo",
            executor="x",
            queue="q",
            spec=spec,
            status=JobStatus.ORCHESTRATED,
            attempt=1,
        )

    def run(self, job: JobExecution, *failpoints: str) -> str:
        job.refresh_from_db()
        with arm(*failpoints):
            try:
                return executor.execute_job(job.pk, job.attempt, job.spec)
            except FailpointCrash:
                return "crashed"

    def redeliver(self, job: JobExecution) -> None:
        """What the orchestrator does when a worker stopped heartbeating."""
        JobExecution.objects.filter(pk=job.pk).update(status=JobStatus.ORCHESTRATED, attempt=job.attempt + 1)
        job.refresh_from_db()

    def exactly_once(self) -> tuple[int, int]:
        return compare(self.landing.ids(), read_ids(self.publish))

    def watermark(self, dataset: str) -> str:
        return DatasetState.objects.get(dataset_urn=dataset).watermark

    def pending(self, dataset: str) -> CommitStoreDataset | None:
        return CommitStoreDataset.objects.filter(dataset_urn=dataset).first()


def all_points(max_steps: int) -> list[str]:
    """Every failpoint a run can hit, given at most `max_steps` steps per dataset."""
    between = [f"after_step:{n}" for n in range(1, max_steps)]
    commit = [
        "after_task_output",
        "after_steps_written",
        *between,
        "before_steps_removed",
        "after_steps_removed",
    ]
    recovery = [f"recovery.after_step:{n}" for n in range(1, max_steps)]
    return [*commit, *recovery, "recovery.before_steps_removed", "recovery.after_steps_removed"]


def by_dataset(points: Iterable[str], datasets: Iterable[str]) -> list[str]:
    return [f"{p}@{d}" for p in points for d in datasets]


# --- real processes: a scheduler and warm workers SIGKILLed at a named point ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def eo_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("exactly-once")


@pytest.fixture(autouse=True)
def _relay_through_the_stack_broker(monkeypatch):
    """This module's stack has a broker of its own (overrides the conftest's)."""
    relay_through(monkeypatch, CRASH_BROKER_URL)


@pytest.fixture(scope="module")
def eo_env(django_db_setup, django_db_blocker, eo_dir):
    url = CRASH_BROKER_URL
    redis.Redis.from_url(url).flushdb()
    with django_db_blocker.unblock():
        return process_env(
            eo_dir / "var",
            url,
            WORKER_LEASE_SECONDS="5",
        )


@pytest.fixture
def eo_scheduler(eo_env, eo_dir):
    proc = start_scheduler("eo-scheduler", eo_env, eo_dir / "logs")
    yield proc
    proc.stop()


class Workers:
    """Two warm workers consume the executor's queue, each armed through a
    failpoint file of its own. When one dies the survivor takes the
    redelivered attempt (no Spark start-up on the way) and a replacement
    starts in the background."""

    SIZE = 2

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.count = 0
        self.live: list[tuple[Proc, Path]] = []

    def _argv(self, name: str) -> list[str]:
        return [
            str(VENV_BIN / "celery"),
            *("-A", "portal.celery", "worker", "--pool", "threads", "--concurrency", "2"),
            *("--without-mingle", "--without-gossip", "--loglevel", "INFO", "-n", f"{name}@%h", "-Q", QUEUE),
        ]

    def fill(self, point: str) -> None:
        """Start workers (armed with `point`) until there are SIZE; does not wait for them."""
        while len(self.live) < self.SIZE:
            self.count += 1
            armed = self.log_dir / f"failpoint-{self.count}"
            armed.parent.mkdir(parents=True, exist_ok=True)
            armed.write_text(point)
            name = f"eo-worker-{self.count}"
            env = {**self.env, "FLOWPORT_FAILPOINT_FILE": str(armed), "FLOWPORT_FAILPOINT_ACTION": "kill"}
            self.live.append((Proc(name, self._argv(name), env, self.log_dir), armed))

    def wait_ready(self) -> None:
        for proc, _ in self.live:
            proc.wait_for_log("ready.", timeout=120)

    def arm(self, point: str) -> None:
        for _, armed in self.live:
            armed.write_text(point)

    def wait_for_a_death(self, timeout: float = 300) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for entry in list(self.live):
                proc = entry[0]
                if not proc.alive():
                    self.live.remove(entry)
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        proc.kill9()  # the dead worker's Spark JVM, if it is still there
                    return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        for proc, _ in self.live:
            proc.stop()


def finished(execution: FlowExecution, timeout: float = 300) -> FlowExecution:
    def done() -> bool:
        execution.refresh_from_db()
        return execution.status in {"COMMITTED", "FAILED", "CANCELLED", "SKIPPED"}

    wait_until(done, timeout, f"execution {execution.execution_id} to finish")
    return execution


def how(execution: FlowExecution) -> str:
    job = execution.jobs.get()
    last = JobState.objects.filter(job=job).order_by("-attempt").first()
    recovered = last.recovered if last else {}
    redone = sum(d["executed"] for d in recovered.values() if d["status"] == "RECOVERED")
    if recovered:
        return f"attempt {job.attempt}: {len(recovered)} dataset(s) finished, {redone} step(s) redone"
    if "already delivered by an earlier attempt" in job.message:
        return f"attempt {job.attempt}: nothing stored, delivered by attempt {job.attempt - 1}"
    return f"attempt {job.attempt}: nothing stored, pulled again"


# --- one attempt in a worker process of its own, SIGKILLed at a named point ---------------------

_ATTEMPT = (
    "import json, sys, django; django.setup(); "
    "from portal.orchestration.worker import executor; "
    "executor.execute_job(int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3]))"
)


def killed_attempt(job: JobExecution, env: dict[str, str], point: str, log_dir: Path) -> int:
    """Run the job's current attempt as a worker does (``execute_job``: claim, Spark, recovery,
    pull, commit) in a process of its own, armed to SIGKILL itself at `point` (a failpoint name,
    or several separated by commas); its exit code (-9 when it was killed there)."""
    import subprocess

    from django.conf import settings

    job.refresh_from_db()
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / f"attempt-{job.pk}-{job.attempt}.log").open("ab") as out:
        done = subprocess.run(
            [str(VENV_BIN / "python"), "-c", _ATTEMPT, str(job.pk), str(job.attempt), json.dumps(job.spec)],
            cwd=str(Path(__file__).resolve().parents[2]),
            env={
                **env,
                "DJANGO_SETTINGS_MODULE": "portal.settings",
                # the worker's security check: the flow's work folder is under this one
                "FLOWPORT_WORK_DIR": str(settings.FLOWPORT_WORK_DIR),
                "FLOWPORT_LOG_DIR": str(settings.FLOWPORT_LOG_DIR),
                "FLOWPORT_FAILPOINT": point,
                "FLOWPORT_FAILPOINT_ACTION": "kill",
            },
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=600,
            check=False,
        )
    return done.returncode


# --- a files flow into each destination kind and write mode (test_exactly_once_modes, the matrix) ---

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
        user = "postgres" if self.kind == "postgresql" else "root"
        return {"name": self.name, "kind": "jdbc", "properties": {"url": url, "user": user}}

    def properties(self) -> dict[str, str]:
        if self.kind == "parquet":
            return {"writer.output.format": "parquet"}
        if self.kind == "iceberg":
            return {"writer.iceberg.table": self.table}
        return {"writer.jdbc.table": self.table}  # the node's account logs in

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

    def staging_left(self) -> list[str]:
        """Flowport's staging tables still beside the target: none once a run has published, even
        after an execution killed or given up on after staging (the next publish sweeps them)."""
        if self.kind == "postgresql":
            with psycopg.connect(f"postgres://postgres@127.0.0.1:5432/{self.pg_db}") as db:
                found = db.execute("SELECT tablename FROM pg_tables WHERE starts_with(tablename, 'fp_stg_')")
                return sorted(str(r[0]) for r in found)
        if self.kind == "mariadb":
            return sorted(mysql("SHOW TABLES LIKE 'fp\\_stg\\_%'", self.my_db).split())
        return []

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
    if mode == "append":
        return sorted((i, n, True) for batch in RUNS[:runs] for i, n in batch)
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


class Source:
    """Where each run's rows come from: a folder a new CSV file lands in ("files"), or a PostgreSQL
    table whose rows are inserted or updated with a later ``updated_at`` ("jdbc", read
    incrementally on that column). A run's watermark is its file, or its time."""

    def __init__(self, kind: str, tmp_path: Path, name: str) -> None:
        self.kind, self.name, self.runs = kind, name, 0
        self.landing = tmp_path / "landing"
        self.pg_db = ""
        if kind == "files":
            (self.landing / "customers").mkdir(parents=True)
        else:
            self.pg_db = f"fp_src_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{self.pg_db}"')
            with psycopg.connect(self._url(), autocommit=True) as db:
                db.execute(
                    "CREATE TABLE customers (id bigint PRIMARY KEY, name text, updated_at timestamptz)"
                )

    def _url(self) -> str:
        return f"postgres://postgres@127.0.0.1:5432/{self.pg_db}"

    def node(self) -> dict[str, Any]:
        if self.kind == "files":
            return {"name": self.name, "kind": "files", "properties": {"path": str(self.landing)}}
        return {
            "name": self.name,
            "kind": "jdbc",
            "properties": {"url": f"jdbc:postgresql://127.0.0.1:5432/{self.pg_db}", "user": "postgres"},
        }

    def properties(self) -> dict[str, str]:
        if self.kind == "files":
            return {"source.files.format": "csv", "source.schema": "id BIGINT, name STRING"}
        return {
            "source.jdbc.tables": "customers",
            "extract.delta.fields": "updated_at",
        }

    def land(self, rows: list[tuple[int, str]]) -> None:
        self.runs += 1
        if self.kind == "files":
            path = self.landing / "customers" / f"batch-{self.runs}.csv"
            path.write_text("id,name\n" + "".join(f"{i},{n}\n" for i, n in rows))
            stamp = 1_700_000_000 + self.runs
            os.utime(path, (stamp, stamp))
            return
        with psycopg.connect(self._url(), autocommit=True) as db, db.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO customers VALUES (%s, %s, %s) ON CONFLICT (id) DO UPDATE "
                "SET name = excluded.name, updated_at = excluded.updated_at",
                [(i, n, f"2025-01-0{self.runs} 12:00:00+00") for i, n in rows],
            )

    def watermark_of(self, run: int, watermark: str) -> bool:
        """Is ``watermark`` what run ``run`` read last?"""
        if self.kind == "files":
            return watermark.endswith(f"batch-{run}.csv")
        return watermark.replace("T", " ").startswith(f"2025-01-0{run} 12:00:00")

    def staging_left(self) -> list[str]:
        """Flowport's staging tables still beside the target: none once a run has published, even
        after an execution killed or given up on after staging (the next publish sweeps them)."""
        if self.kind == "postgresql":
            with psycopg.connect(f"postgres://postgres@127.0.0.1:5432/{self.pg_db}") as db:
                found = db.execute("SELECT tablename FROM pg_tables WHERE starts_with(tablename, 'fp_stg_')")
                return sorted(str(r[0]) for r in found)
        if self.kind == "mariadb":
            return sorted(mysql("SHOW TABLES LIKE 'fp\\_stg\\_%'", self.my_db).split())
        return []

    def drop(self) -> None:
        if self.pg_db:
            with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE "{self.pg_db}" WITH (FORCE)')


class Story:
    """The flow from a source (:class:`Source`) into one destination kind in one write mode, its
    executions run in this process."""

    def __init__(
        self, tmp_path: Path, target: str, mode: str, owner: Any, source_kind: str = "files"
    ) -> None:
        source = f"landing-{mode}"
        self.source = Source(source_kind, tmp_path, source)
        self.dest = Destination(target, tmp_path, mode)
        self.owner = owner
        topology.create_data_node(self.source.node())
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
                    **self.source.properties(),
                    "writer.write.mode": mode,
                    "extract.primary.key.fields": "id",
                    **self.dest.properties(),
                },
            },
        )
        self.flow = flow_services.set_paused(flow, False)

    def land(self, rows: list[tuple[int, str]]) -> None:
        self.source.land(rows)

    def drop(self) -> None:
        self.dest.drop()
        self.source.drop()

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
