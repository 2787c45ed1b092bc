"""Executions as the orchestrator leaves them, with their jobs, for the stories that read
runs back (dashboards, history, alerts, capacity)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

from django.utils import timezone

from portal.orchestration.models import FlowExecution, JobExecution

_ids = itertools.count(1_700_000_000_000)


def make_execution(
    flow=None,
    *,
    flow_group: str = "sales",
    flow_name: str = "orders",
    status: str = "COMMITTED",
    created: datetime | None = None,
    started: datetime | None = None,
    ended: datetime | None = None,
    message: str = "",
    jobs: list[dict] | None = None,
) -> FlowExecution:
    """An execution as the orchestrator leaves it; `jobs` are JobExecution fields."""
    if flow is not None:
        flow_group, flow_name = flow.flow_group, flow.flow_name
    execution = FlowExecution.objects.create(
        flow=flow,
        flow_group=flow_group,
        flow_name=flow_name,
        execution_id=next(_ids),
        trigger=FlowExecution.Trigger.RUN_NOW,
        status=status,
        message=message,
        started_at=started,
        ended_at=ended,
    )
    if created is not None:  # auto_now_add: set afterwards
        FlowExecution.objects.filter(pk=execution.pk).update(created=created)
        execution.refresh_from_db()
    for index, fields in enumerate(jobs or []):
        values = {
            "job_name": f"{flow_group}.{flow_name}.{index + 1}-a-to-b",
            "job_group": flow_group,
            "executor": "local",
            "queue": "executor.local",
            "hop_index": index + 1,
        }
        values.update(fields)
        JobExecution.objects.create(execution=execution, **values)
    return execution


def finished_run(flow, *, minutes_ago: float, seconds: float, records: int, status: str = "COMMITTED"):
    now = timezone.now()
    started = now - timedelta(minutes=minutes_ago)
    ended = started + timedelta(seconds=seconds)
    return make_execution(
        flow,
        status=status,
        created=started,
        started=started,
        ended=ended,
        jobs=[{"status": status, "processed_count": records, "started_at": started, "ended_at": ended}],
    )
