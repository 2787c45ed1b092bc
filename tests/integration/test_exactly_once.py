"""Exactly-once publishing under crashes.

1. SIGKILL at every distinct crash point, with real processes: a files flow
   (landing → lake, two datasets) run by a real Celery worker (Spark, the
   real pipeline) and a real scheduler process (actions, outbox, the sweep
   that redelivers the job of a dead worker), on the Redis broker (DB 11)
   and the pytest-django test database. The worker is armed through
   FLOWPORT_FAILPOINT_FILE and kills itself with SIGKILL at the point;
   another worker process takes the attempt the scheduler redelivers once
   the lease lapsed, recovers, and the lake must hold every source record
   exactly once with the watermark at the source max. Two warm workers
   share the queue so no Spark start-up sits between a crash and its
   recovery; a replacement starts in the background after each death.

2. Random crash points until 32 runs crashed, in-process (bounded time): the
   worker's `execute_job` with the commit path for real and a failpoint
   that raises instead of killing; Spark is replaced by the copy pipeline
   (real FileSource planning, the file writer's task-output layout), some
   tasks fail on purpose, crashes also hit recovery, and the next run is a
   redelivery of the same execution or a new execution at random.

Both print the table: crash point → recovered? duplicates? lost?
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from pathlib import Path

import pytest
import redis

from portal.flows import services as flow_services
from portal.orchestration import services
from portal.orchestration.models import (
    CommitStoreDataset,
    DatasetState,
    ExecutionStatus,
    FlowExecution,
    JobState,
)
from portal.orchestration.state import commitstore
from portal.orchestration.worker import executor
from portal.topology import services as topology
from tests.factories import UserFactory
from tests.integration.crash_harness import (
    CRASH_BROKER_URL,
    Landing,
    RecordingPipeline,
    World,
    all_points,
    compare,
    format_table,
    read_ids,
)
from tests.integration.stack import VENV_BIN, Proc, process_env, relay_through, start_scheduler, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "eo.ingest"
DATASETS = ("customers", "orders")

# Each entry is one scenario: the failpoints of successive attempts (the
# last one recovers unarmed). Every dataset has 3 steps per run (2 renames,
# the watermark), so "between each pair of steps" is after_step:1 and :2;
# the last scenario also kills the recovering worker. after_steps_removed
# and the other recovery points are covered by the in-process random test.
SIGKILL_POINTS = [
    ["after_task_output"],
    ["after_steps_written"],
    ["after_step:1"],
    ["after_step:2"],
    ["before_steps_removed"],
    ["after_step:2", "recovery.after_step:1"],
]


# --- real processes ---------------------------------------------------------------------------


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


@pytest.fixture
def lake_flow(tmp_path):
    for name in ("landing", "lake"):
        (tmp_path / name).mkdir()
        topology.create_data_node(
            {"name": name, "kind": "files", "properties": {"path": str(tmp_path / name)}}
        )
    topology.create_executor(
        {"name": "eo-ingest", "technology": "spark-local", "spark_master": "local[2]", "queue": QUEUE},
        capabilities=[("landing", "lake")],
    )
    flow = flow_services.create_flow(
        owner=UserFactory(username="olivia"),
        data={
            "flow_group": "eo",
            "flow_name": "landing-to-lake",
            "schedule": "",
            "source": "landing",
            "destinations": ["lake"],
            "properties": {
                "source.files.format": "json",
                "source.schema": "id INT, dataset STRING",
                "source.files.workunit.max.files": "1",
                "writer.output.format": "json",
                "job.commit.policy": "full",
            },
            "paused": True,  # no schedule = run once on save; the story runs it itself
        },
    )
    flow = flow_services.set_paused(flow, False)
    return flow, Landing(tmp_path / "landing"), tmp_path / "lake" / "eo" / "landing-to-lake"


def _finished(execution: FlowExecution, timeout: float = 300) -> FlowExecution:
    def done() -> bool:
        execution.refresh_from_db()
        return execution.status in {"COMMITTED", "FAILED", "CANCELLED", "SKIPPED"}

    wait_until(done, timeout, f"execution {execution.execution_id} to finish")
    return execution


def _how(execution: FlowExecution) -> str:
    job = execution.jobs.get()
    last = JobState.objects.filter(job=job).order_by("-attempt").first()
    recovered = last.recovered if last else {}
    redone = sum(d["executed"] for d in recovered.values() if d["status"] == "RECOVERED")
    if recovered:
        return f"attempt {job.attempt}: {len(recovered)} dataset(s) finished, {redone} step(s) redone"
    return f"attempt {job.attempt}: nothing stored, pulled again"


@pytest.mark.timeout(1500)  # minutes of real Spark workers; far longer on 2 vCPUs shared with other suites
def test_sigkill_at_every_crash_point_then_a_fresh_worker_recovers(
    lake_flow, eo_env, eo_dir, eo_scheduler, capsys
):
    flow, landing, lake = lake_flow
    workers = Workers(eo_env, eo_dir / "logs")
    rows = []
    try:
        workers.fill("")
        workers.wait_ready()
        for scenario in SIGKILL_POINTS:
            for dataset in DATASETS:  # two new files per dataset: >= 3 steps each
                landing.add(dataset, 3)
                landing.add(dataset, 2)
            workers.arm(scenario[0])  # whichever worker takes the job dies at the point
            began = time.monotonic()
            execution = services.run_now(flow, user=flow.owner)
            crashed = []
            for following in [*scenario[1:], ""]:
                died = workers.wait_for_a_death()
                crashed.append(died)
                if not died:
                    break
                workers.arm(following)  # the survivor takes the redelivered attempt
                workers.fill(following)
            execution = _finished(execution)
            duplicates, lost = compare(landing.ids(), read_ids(lake))
            marks = [
                DatasetState.objects.get(dataset_urn=d).watermark == landing.max_watermark(d)
                for d in DATASETS
            ]
            rows.append(
                {
                    "point": " then ".join(scenario),
                    "crashed": "SIGKILL" if all(crashed) else f"no ({crashed})",
                    "recovered": f"yes ({_how(execution)})"
                    if execution.status == ExecutionStatus.COMMITTED
                    else f"NO: {execution.status} {execution.message[:80]}",
                    "duplicates": duplicates,
                    "lost": lost,
                    "watermark": "yes" if all(marks) else "NO",
                    "seconds": f"{time.monotonic() - began:.0f}",
                }
            )
            assert not CommitStoreDataset.objects.exists()
    finally:
        workers.stop()
        table = format_table(rows)
        with capsys.disabled():
            print(f"\n\nSIGKILL crash points ({workers.count} worker processes):\n{table}\n")
    assert len(rows) == len(SIGKILL_POINTS), table
    for row in rows:
        assert row["crashed"] == "SIGKILL", table
        assert row["recovered"].startswith("yes"), table
        assert (row["duplicates"], row["lost"], row["watermark"]) == (0, 0, "yes"), table


# --- random crash points, in-process --------------------------------------------------------------

CRASHED_RUNS = 32  # runs whose crash point was reached


@pytest.fixture
def world(tmp_path, monkeypatch, settings):
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
    settings.FLOWPORT_WORK_DIR = str(tmp_path / "work")
    settings.WORKER_HEARTBEAT_SECONDS = 60  # the in-process runs are short; no heartbeat traffic
    seed = int(os.environ.get("FLOWPORT_CRASH_SEED", "20261122"))
    pipeline = RecordingPipeline()
    monkeypatch.setattr(executor, "run_job", pipeline)
    commitstore.reset_failpoints()
    world = World(tmp_path, pipeline)
    world.props["commit.step.max.redo"] = "1"
    world.seed = seed
    yield world
    commitstore.reset_failpoints()


def test_random_crash_points_over_many_runs_publish_exactly_once(world, capsys):
    rng = random.Random(world.seed)
    datasets = ["a", "b", "c"]
    points = all_points(max_steps=3)
    commit_points = [p for p in points if not p.startswith("recovery.")]
    recovery_points = [p for p in points if p.startswith("recovery.")]
    rows = []
    started = time.monotonic()
    crashed_runs = 0
    while crashed_runs < CRASHED_RUNS and len(rows) < 3 * CRASHED_RUNS:
        for dataset in datasets:
            for _ in range(rng.randint(0, 2)):
                world.landing.add(dataset, rng.randint(1, 4))
        scenario = [rng.choice(commit_points)]
        if rng.random() < 0.3:
            scenario.append(rng.choice(recovery_points))  # crash again while recovering
        scenario = [
            f"{p}@{rng.choice(datasets)}" if p != "after_task_output" and rng.random() < 0.4 else p
            for p in scenario
        ]

        job = world.new_job()
        crashes: list[bool] = []
        outcome = ""
        for point in scenario:
            outcome = world.run(job, point)
            crashes.append(outcome == "crashed")
            if outcome != "crashed":
                break
            if rng.random() < 0.5:
                world.redeliver(job)  # the same execution's next attempt
            else:
                job = world.new_job()  # the flow's next execution
        # Unarmed runs until one commits.
        for _ in range(10):
            if outcome == "committed":
                break
            if outcome == "failed":
                job = world.new_job()
            outcome = world.run(job)
        crashed_runs += any(crashes)
        duplicates, lost = world.exactly_once()
        marks = all(
            world.watermark(d) == world.landing.max_watermark(d) for d in datasets if world.landing.ids(d)
        )
        rows.append(
            {
                "point": f"{len(rows) + 1:02d} " + " then ".join(scenario),
                "crashed": f"{sum(crashes)}x" if any(crashes) else "not reached",
                "recovered": "yes"
                if outcome == "committed" and not CommitStoreDataset.objects.exists()
                else "NO",
                "duplicates": duplicates,
                "lost": lost,
                "watermark": "yes" if marks else "NO",
            }
        )
    elapsed = time.monotonic() - started
    table = format_table(rows)
    with capsys.disabled():
        print(
            f"\n\nRandom crash points, in-process (seed {world.seed}, {len(rows)} runs, {crashed_runs} crashed, "
            f"{elapsed:.1f}s):\n{table}\n"
        )
    assert crashed_runs >= CRASHED_RUNS, table
    for row in rows:
        assert (row["recovered"], row["duplicates"], row["lost"], row["watermark"]) == ("yes", 0, 0, "yes"), (
            table
        )
