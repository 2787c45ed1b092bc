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

import os
import random
import time

import pytest

from portal.flows import services as flow_services
from portal.orchestration import services
from portal.orchestration.models import (
    CommitStoreDataset,
    DatasetState,
    ExecutionStatus,
)
from portal.orchestration.state import commitstore
from portal.orchestration.worker import executor
from portal.topology import services as topology
from tests.factories import UserFactory
from tests.integration.crash_harness import (  # noqa: F401 (fixtures)
    CRASH_BROKER_URL,
    QUEUE,
    Landing,
    RecordingPipeline,
    Workers,
    World,
    _relay_through_the_stack_broker,
    all_points,
    compare,
    eo_dir,
    eo_env,
    eo_scheduler,
    finished,
    format_table,
    how,
    read_ids,
)

pytestmark = pytest.mark.django_db(transaction=True)

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


@pytest.mark.timeout(1500)  # minutes of real Spark workers; far longer on 2 vCPUs shared with other suites
def test_sigkill_at_every_crash_point_then_a_fresh_worker_recovers(lake_flow, request, capsys):
    env, folder = request.getfixturevalue("eo_env"), request.getfixturevalue("eo_dir")
    request.getfixturevalue("eo_scheduler")
    flow, landing, lake = lake_flow
    workers = Workers(env, folder / "logs")
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
            execution = finished(execution)
            duplicates, lost = compare(landing.ids(), read_ids(lake))
            marks = [
                DatasetState.objects.get(dataset_urn=d).watermark == landing.max_watermark(d)
                for d in DATASETS
            ]
            rows.append(
                {
                    "point": " then ".join(scenario),
                    "crashed": "SIGKILL" if all(crashed) else f"no ({crashed})",
                    "recovered": f"yes ({how(execution)})"
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
