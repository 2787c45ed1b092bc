"""Failures the orchestration must survive, in bounded time: schedulers
racing (and one dying), a worker killed with SIGKILL mid-job, and the broker
going away while jobs are dispatched."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from croniter import croniter

from portal.flows.models import FlowConfig
from portal.orchestration import services
from portal.orchestration.models import (
    ExecutionStatus,
    FlowExecution,
    JobExecution,
    JobStatus,
    OutboxMessage,
    ScheduleCursor,
)
from tests.builders.stack import crash_topology, finished, make_flow, published_ids
from tests.factories import UserFactory
from tests.integration.stack import (
    process_env,
    relay_through,
    start_redis,
    start_scheduler,
    start_worker,
    wait_until,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def scheduler(stack_env, stack_dir):
    """Per test here, not per module: the broker-outage test runs its own
    scheduler on a private broker, and a module scheduler still running would
    claim its LAUNCH actions and relay them to the module's broker instead
    (which made that test fail whenever it ran after the worker-kill test)."""
    proc = start_scheduler("scheduler", stack_env, stack_dir / "logs")
    yield proc
    proc.stop()


FLOWS = 200
RUN_SECONDS = 60
BACKLOG_MINUTES = 3


def test_three_schedulers_turn_every_tick_into_exactly_one_execution(stack_env, stack_dir):
    """200 flows due every minute with 3 minutes of missed ticks to catch up
    (policy all), three scheduler processes for 60 s, one of them killed -9
    half-way: every tick has exactly one execution."""
    owner = UserFactory(username="olivia")
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=BACKLOG_MINUTES)
    flows = FlowConfig.objects.bulk_create(
        FlowConfig(
            owner=owner,
            flow_group="race",
            flow_name=f"flow-{n:03d}",
            schedule="* * * * *",
            source="nowhere",
            destinations=["void"],
            properties={"flow.catchUpPolicy": "all"},
        )
        for n in range(FLOWS)
    )
    ScheduleCursor.objects.bulk_create(
        ScheduleCursor(flow=f, schedule="* * * * *", last_tick=start) for f in flows
    )
    schedulers = [start_scheduler(f"race-{n}", stack_env, stack_dir / "logs") for n in range(3)]
    try:
        time.sleep(RUN_SECONDS / 2)
        schedulers[0].kill9()  # a scheduler dies holding whatever it held
        time.sleep(RUN_SECONDS / 2)
        stopped_at = datetime.now(UTC)
    finally:
        for proc in schedulers:
            proc.stop()
    # Every tick at least 3 s old (three poll intervals) must have been seen.
    settled = stopped_at - timedelta(seconds=3)
    expected_ticks = []
    itr = croniter("* * * * *", start)
    while (tick := itr.get_next(datetime)) <= settled:
        expected_ticks.append(tick)
    rows = list(
        FlowExecution.objects.filter(flow_group="race").values_list(
            "flow_name", "scheduled_at", "execution_id"
        )
    )
    per_tick = Counter((name, at) for name, at, _ in rows)
    duplicates = {key: n for key, n in per_tick.items() if n > 1}
    missing = [(f.flow_name, t) for f in flows for t in expected_ticks if (f.flow_name, t) not in per_tick]
    assert len(expected_ticks) >= BACKLOG_MINUTES + 1
    assert not duplicates, f"{len(duplicates)} tick(s) with several executions"
    assert not missing, f"{len(missing)} tick(s) without an execution, e.g. {missing[:3]}"
    ids = Counter((name, execution_id) for name, _, execution_id in rows)
    assert max(ids.values()) == 1, "an execution id was used twice for one flow"
    print(
        f"\n{len(rows)} executions for {FLOWS} flows x {len(expected_ticks)}+ ticks, 0 duplicates, 0 missing"
    )


def test_a_worker_killed_mid_job_has_its_job_redelivered_and_run_once(
    tmp_path, stack_env, stack_dir, scheduler
):
    crash_topology(tmp_path, "it.crash")
    release = tmp_path / "release"
    flow = make_flow(
        **{"slow.seconds.per.row": "1", "slow.release.file": str(release), "numbers.per.run": "30"}
    )
    doomed = start_worker("doomed", ["it.crash"], stack_env, stack_dir / "logs")
    try:
        execution = services.run_now(flow, user=flow.owner)
        wait_until(
            lambda: JobExecution.objects.filter(execution=execution, status=JobStatus.RUNNING).exists(),
            60,
            "the job to run",
        )
        time.sleep(2)
    finally:
        doomed.kill9()
    release.touch()
    rescuer = start_worker("rescuer", ["it.crash"], stack_env, stack_dir / "logs")
    try:
        finished(execution, timeout=120)
    finally:
        rescuer.stop()
    job = execution.jobs.get()
    assert execution.status == ExecutionStatus.COMMITTED, execution.message
    assert job.attempt == 2 and job.worker.split(":")[1] == str(rescuer.pid), job.worker
    assert published_ids(tmp_path / "lake" / "it" / "numbers-to-lake") == list(range(1, 31))


def test_dispatch_survives_ten_seconds_without_the_broker(tmp_path, stack_dir, monkeypatch):
    redis_proc, port = start_redis(stack_dir / "logs")
    broker_url = f"redis://127.0.0.1:{port}/0"
    relay_through(monkeypatch, broker_url)
    env = process_env(stack_dir / "var-redis", broker_url)
    crash_topology(tmp_path, "it.outage")
    worker = start_worker("outage-worker", ["it.outage"], env, stack_dir / "logs")
    scheduler = start_scheduler("outage-scheduler", env, stack_dir / "logs")
    try:
        flows = [make_flow(name=f"outage-{n}", **{"numbers.per.run": "5"}) for n in range(3)]
        redis_proc.kill9()
        executions = [services.run_now(flow, user=flow.owner) for flow in flows]
        wait_until(
            lambda: OutboxMessage.objects.filter(sent_at__isnull=True).exclude(last_error="").exists(),
            30,
            "the relay to fail",
        )
        time.sleep(10)
        assert not JobExecution.objects.filter(status__in=[JobStatus.RUNNING, JobStatus.COMMITTED]).exists()
        redis_proc, _ = start_redis(stack_dir / "logs", port)
        for execution in executions:
            finished(execution, timeout=120)
    finally:
        scheduler.stop()
        worker.stop()
        redis_proc.stop()
    assert [e.status for e in executions] == [ExecutionStatus.COMMITTED] * 3, [e.message for e in executions]
    assert not OutboxMessage.objects.filter(sent_at__isnull=True).exists()
    for n in range(3):
        assert published_ids(tmp_path / "lake" / "it" / f"outage-{n}") == list(range(1, 6))
