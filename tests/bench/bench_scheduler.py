"""Scheduler throughput: 10,000 flows due at the same minute → how long
until every tick is a FlowExecution (with its LAUNCH action), on PostgreSQL.
Goal: ≤ 10 s on this machine.

    .venv/bin/python tests/bench/bench_scheduler.py [flows]

Standalone (not a pytest test): creates a throw-away PostgreSQL database
(BENCH_DATABASE_ADMIN_URL, default postgres://postgres@127.0.0.1:5432/postgres),
generates the flows with their cursors one minute behind, then times one
scheduler pass (`schedule_due_ticks`) and, as the same-run reference, a bare
bulk INSERT of the same number of FlowExecution rows.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOAL_SECONDS = 10.0


sys.path.insert(0, str(ROOT))
from tests.bench.benchdb import throwaway_database  # noqa: E402


def main(flows: int) -> int:
    with throwaway_database():
        return run(flows)


def run(flows: int) -> int:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from portal.flows.models import FlowConfig
    from portal.orchestration.control.scheduler import schedule_due_ticks
    from portal.orchestration.models import Action, FlowExecution, ScheduleCursor

    owner = get_user_model().objects.create(username="bench")
    now = timezone.now().replace(second=0, microsecond=0) + timedelta(seconds=1)
    rows = FlowConfig.objects.bulk_create(
        FlowConfig(
            owner=owner,
            flow_group="bench",
            flow_name=f"f{n:05d}",
            schedule="* * * * *",
            source="a",
            destinations=["b"],
        )
        for n in range(flows)
    )
    ScheduleCursor.objects.bulk_create(
        ScheduleCursor(flow=f, schedule="* * * * *", last_tick=now - timedelta(seconds=61)) for f in rows
    )

    started = time.perf_counter()
    report = schedule_due_ticks(now=now)
    elapsed = time.perf_counter() - started
    created = FlowExecution.objects.filter(trigger="SCHEDULE").count()
    launches = Action.objects.filter(kind="LAUNCH").count()

    ref_started = time.perf_counter()
    FlowExecution.objects.bulk_create(
        FlowExecution(
            flow=f, flow_group=f.flow_group, flow_name=f.flow_name, execution_id=n, trigger="RUN_NOW"
        )
        for n, f in enumerate(rows)
    )
    reference = time.perf_counter() - ref_started

    print(f"flows due at one minute:          {flows}")
    print(f"executions created (report/rows):  {report.created} / {created}, LAUNCH actions: {launches}")
    print(f"one scheduler pass:                {elapsed:.2f} s  ({flows / elapsed:,.0f} ticks/s)")
    print(
        f"goal:                              <= {GOAL_SECONDS:.0f} s  -> ratio {elapsed / GOAL_SECONDS:.2f} of goal"
    )
    print(
        f"reference bulk INSERT of as many:  {reference:.2f} s  (pass / reference = {elapsed / reference:.1f}x)"
    )
    return 0 if created == flows == launches else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000))
