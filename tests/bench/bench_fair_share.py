"""Fair sharing of one executor between two tenants, on PostgreSQL, through the
real orchestrator (action handlers, quota gate, fair pick) on a simulated clock:
workers are played in-process (a free job thread claims a dispatched job at the
next poll, as a Celery worker would, and reports it committed RUN_SECONDS
later; no Spark), and time moves from event to event, so the figures are the
scheduling policy's, not this machine's load.

Tenant A queues a backfill of 500 jobs; tenant B's scheduled flow is due every
minute. The executor has THREADS job threads and an executor quota of as many
concurrent jobs. B's start lag (its tick -> a worker thread takes its job) is
measured in the same run:

  idle       B alone on the executor: the reference (one poll)
  headroom   A's backlog beside it; the default quota lets one user hold
             THREADS - 1 jobs, so a thread is always left for another owner
  fair       A's backlog, no per-user quota: B is first in line for the next
             free thread, but waits for one (up to RUN_SECONDS / THREADS)
  fifo       A's backlog, no quotas at all (before quotas: every job is sent to
             the queue at once and workers take them in order; first ticks only)

Goal: B's p99 with A's backlog <= 2 x its idle p99 (the headroom line).

    .venv/bin/python tests/bench/bench_fair_share.py [backlog]
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THREADS = 4
RUN_SECONDS = 40.0  # a job's mean run time; each runs 0.5-1.4 times it (a fixed seed), shorter than a tick
TICK = 60.0  # B is due every minute
POLL = 1.0  # the scheduler's and the workers' poll
FIFO_TICKS = 5


sys.path.insert(0, str(ROOT))
from tests.bench.benchdb import throwaway_database  # noqa: E402


def main(backlog: int) -> int:
    with throwaway_database():
        return run(backlog)


class Clock:
    """The simulated now every timezone.now() in the portal reads."""

    def __init__(self) -> None:
        from django.utils import timezone

        self.real_now = timezone.now
        self.now = timezone.now()
        timezone.now = lambda: self.now  # type: ignore[assignment]

    def advance_to(self, moment) -> None:
        self.now = max(self.now, moment)


class Workers:
    """THREADS job threads: each poll they take dispatched jobs in the order they were
    sent (the broker's FIFO queue) and report the ones whose run time is up. Run times vary,
    so threads free up one at a time as they would, not all at once."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.running: dict[int, tuple[object, object]] = {}
        self.started: dict[int, object] = {}  # job id → when a thread took it
        self.durations = random.Random(7)

    def step(self) -> None:
        from portal.orchestration.models import JobExecution, JobStatus
        from portal.orchestration.worker import executor

        now = self.clock.now
        for pk, (job, ends) in list(self.running.items()):
            if ends <= now:
                executor.report(job, job.attempt, JobStatus.COMMITTED)
                del self.running[pk]
        free = THREADS - len(self.running)
        sent = JobExecution.objects.filter(status=JobStatus.ORCHESTRATED).order_by("dispatched_at", "id")
        for job in sent[: max(free, 0)]:
            claimed = executor.claim(job.pk, job.attempt, "bench-worker")
            if claimed is not None:
                run_for = RUN_SECONDS * self.durations.uniform(0.5, 1.4)
                self.running[job.pk] = (claimed, now + timedelta(seconds=run_for))
                self.started[job.pk] = now

    def next_end(self):
        return min((ends for _, ends in self.running.values()), default=None)


def scenario(clock: Clock, flows, *, backlog: int, ticks: int, quotas: str) -> list[float]:
    """B's start lags (seconds) over `ticks` ticks."""
    from portal.orchestration.control.actions import process_actions
    from portal.orchestration.control.scheduler import create_execution
    from portal.orchestration.models import Action, FlowExecution, JobExecution, JobStatus, OutboxMessage
    from portal.quotas.models import Quota
    from portal.topology.models import SpecExecutor

    flow_a, flow_b = flows
    FlowExecution.objects.all().delete()
    Action.objects.all().delete()
    OutboxMessage.objects.all().delete()
    Quota.objects.all().delete()
    if quotas != "none":
        executor = SpecExecutor.objects.get(name="x1")
        Quota.objects.create(scope=Quota.Scope.EXECUTOR, executor=executor, max_concurrent_jobs=THREADS)
    if quotas == "headroom":
        Quota.objects.create(scope=Quota.Scope.DEFAULT, max_concurrent_jobs=THREADS - 1)
    for _ in range(backlog):
        create_execution(
            flow_a, FlowExecution.Trigger.BACKFILL, backfill={"bench": {"low": None, "high": "1"}}
        )
    workers = Workers(clock)
    due: dict[int, object] = {}  # B's execution pk → its tick
    start = clock.now
    next_tick, made = clock.now + timedelta(seconds=TICK / 2), 0
    while True:
        workers.step()
        if clock.now >= next_tick and made < ticks:
            tick = next_tick
            execution = create_execution(flow_b, FlowExecution.Trigger.SCHEDULE, tick)
            due[execution.pk] = tick
            next_tick += timedelta(seconds=TICK)
            made += 1
        while process_actions(limit=500):
            pass
        b_jobs = dict(JobExecution.objects.filter(execution_id__in=due).values_list("pk", "execution_id"))
        if made >= ticks and len(b_jobs) == len(due) and all(pk in workers.started for pk in b_jobs):
            break
        # On to the next event: a poll while a job waits for a thread, a job's end, B's tick.
        waiting = JobExecution.objects.filter(status=JobStatus.ORCHESTRATED).exists()
        moments = [next_tick if made < ticks else None, workers.next_end()]
        moments.append(clock.now + timedelta(seconds=POLL) if waiting else None)
        clock.advance_to(max(min(m for m in moments if m is not None), clock.now + timedelta(seconds=POLL)))
        if clock.now - start > timedelta(days=30):
            raise RuntimeError("the simulation did not finish")
    return [(workers.started[pk] - due[execution]).total_seconds() for pk, execution in b_jobs.items()]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(backlog: int) -> int:
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from portal.flows.models import FlowConfig
    from portal.topology import services as topology

    # The recheck only catches a quota staff changed mid-run; freed threads wake waiters at once.
    settings.QUOTA_RECHECK_SECONDS = 10**7
    # Without quotas B's job waits in the queue behind the whole backlog, longer than the default
    # start deadline (it would fail instead of starting late): the lag is what is measured here.
    settings.JOB_START_SLA_SECONDS = 10**7
    for name in ("a", "b"):
        topology.create_data_node({"name": name, "kind": "files", "properties": {"path": f"var/data/{name}"}})
    topology.create_executor(
        {"name": "x1", "technology": "spark-local", "spark_master": "local[2]", "cost": 100},
        capabilities=[("a", "b")],
    )
    users = get_user_model().objects
    flows = [
        FlowConfig.objects.create(
            owner=users.create(username=f"team-{t}", is_staff=True),  # staff read and write every node
            flow_group="bench",
            flow_name=f"{t}-flow",
            schedule="",
            source="a",
            destinations=["b"],
            properties={"flow.allowConcurrentExecution": "true"},
        )
        for t in ("a", "b")
    ]
    clock = Clock()
    ticks = max(1, int(backlog * RUN_SECONDS / THREADS / TICK))  # B's ticks while A's backlog lasts
    started = time.perf_counter()

    def line(name: str, lags: list[float]) -> str:
        return (
            f"{name:<9} ticks {len(lags):4d}  p50 {statistics.median(lags):8.1f} s  "
            f"p99 {percentile(lags, 0.99):8.1f} s"
        )

    print(f"executor: {THREADS} job threads, quota {THREADS} concurrent jobs; jobs run {RUN_SECONDS:g} s")
    print(f"A's backlog: {backlog} jobs; B due every {TICK:g} s, {ticks} ticks; poll {POLL:g} s", flush=True)
    idle = scenario(clock, flows, backlog=0, ticks=ticks, quotas="headroom")
    print(line("idle", idle), flush=True)
    headroom = scenario(clock, flows, backlog=backlog, ticks=ticks, quotas="headroom")
    print(line("headroom", headroom) + f"  (default quota {THREADS - 1} jobs per user)", flush=True)
    fair = scenario(clock, flows, backlog=backlog, ticks=ticks, quotas="executor")
    print(line("fair", fair) + "  (executor quota only)", flush=True)
    fifo = scenario(clock, flows, backlog=backlog, ticks=FIFO_TICKS, quotas="none")
    print(line("fifo", fifo) + f"  (no quotas; first {FIFO_TICKS} ticks)")
    elapsed = time.perf_counter() - started
    ratio = percentile(headroom, 0.99) / percentile(idle, 0.99)
    print(f"headroom p99 / idle p99 = {ratio:.2f}  (goal <= 2: {'met' if ratio <= 2 else 'NOT met'})")
    print(f"fifo p99 / headroom p99 = {percentile(fifo, 0.99) / percentile(headroom, 0.99):,.0f}x")
    print(f"(simulated {ticks * TICK / 3600:.1f} h per scenario in {elapsed:.0f} s)")
    return 0 if ratio <= 2 else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 500))
