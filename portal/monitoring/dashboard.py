"""What the home dashboard shows, read from the database in a fixed,
small number of queries (it is polled every few seconds by every open
browser)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Min, Prefetch, Q
from django.utils import timezone

from portal.events.models import Event
from portal.monitoring import freshness
from portal.monitoring.models import HealthCheck
from portal.orchestration.models import (
    FINISHED_STATUSES,
    JOB_FINISHED,
    Action,
    ExecutionStatus,
    FlowExecution,
    JobExecution,
    JobStatus,
    OutboxMessage,
    WorkerHeartbeat,
)
from portal.orchestration.status import reported_fraction
from portal.topology.models import SpecExecutor

RUNNING_LIMIT = 50
LIST_LIMIT = 10
STATUS_ORDER = [
    ExecutionStatus.RUNNING,
    ExecutionStatus.COMPILED,
    ExecutionStatus.PENDING,
    ExecutionStatus.COMMITTED,
    ExecutionStatus.FAILED,
    ExecutionStatus.CANCELLED,
    ExecutionStatus.SKIPPED,
]
UNFINISHED = [ExecutionStatus.PENDING, ExecutionStatus.COMPILED, ExecutionStatus.RUNNING]


def job_fraction(job: JobExecution) -> float | None:
    """0..1 for a job; None while it runs without progress reported yet."""
    if job.status in JOB_FINISHED:
        return 1.0
    if job.status != JobStatus.RUNNING:
        return 0.0
    return reported_fraction(job.progress)


def job_progress_text(job: JobExecution) -> str:
    progress = job.progress if isinstance(job.progress, dict) else {}
    parts = []
    if progress.get("work_units_total"):
        parts.append(f"work units {progress.get('work_units_done', 0)}/{progress['work_units_total']}")
    if progress.get("stages_total"):
        parts.append(f"stages {progress.get('stages_completed', 0)}/{progress['stages_total']}")
    if progress.get("tasks_total"):
        parts.append(f"tasks {progress.get('tasks_done', 0)}/{progress['tasks_total']}")
    return " · ".join(parts)


@dataclass
class JobRow:
    job: JobExecution
    fraction: float | None
    detail: str

    @property
    def percent(self) -> int | None:
        return None if self.fraction is None else round(self.fraction * 100)


@dataclass
class RunningRow:
    execution: FlowExecution
    jobs: list[JobRow] = field(default_factory=list)
    fraction: float | None = None

    @property
    def percent(self) -> int | None:
        return None if self.fraction is None else round(self.fraction * 100)

    @property
    def jobs_done(self) -> int:
        return sum(1 for row in self.jobs if row.job.status in JOB_FINISHED)


def running_rows(limit: int = RUNNING_LIMIT) -> tuple[list[RunningRow], int]:
    queryset = FlowExecution.objects.filter(status__in=UNFINISHED)
    total = queryset.count()
    jobs = Prefetch("jobs", queryset=JobExecution.objects.order_by("hop_index", "job_name"))
    rows = []
    for execution in queryset.order_by("-created", "-id").prefetch_related(jobs)[:limit]:
        job_rows = [JobRow(job, job_fraction(job), job_progress_text(job)) for job in execution.jobs.all()]
        fractions = [row.fraction for row in job_rows]
        fraction = None
        if job_rows and None not in fractions:
            fraction = sum(f for f in fractions if f is not None) / len(job_rows)
        rows.append(RunningRow(execution, job_rows, fraction))
    return rows, total


def status_counts(now: datetime) -> list[dict[str, Any]]:
    """Executions created today (local midnight, TIME_ZONE) and in the last
    24 hours, by their status now."""
    midnight = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    day_ago = now - timedelta(hours=24)
    since = min(midnight, day_ago)
    rows = (
        FlowExecution.objects.filter(created__gte=since)
        .values("status")
        .annotate(
            today=Count("id", filter=Q(created__gte=midnight)),
            day=Count("id", filter=Q(created__gte=day_ago)),
        )
        .order_by()
    )
    by_status: dict[str, Mapping[str, Any]] = {row["status"]: row for row in rows}
    return [
        {
            "status": status,
            "label": status.label.lower() if hasattr(status, "label") else status.lower(),
            "today": by_status.get(status, {}).get("today", 0),
            "day": by_status.get(status, {}).get("day", 0),
        }
        for status in STATUS_ORDER
    ]


def _age(moment: datetime | None, now: datetime) -> float | None:
    return None if moment is None else max(0.0, (now - moment).total_seconds())


def backlog(now: datetime) -> dict[str, Any]:
    unsent = OutboxMessage.objects.filter(sent_at__isnull=True)
    outbox = unsent.aggregate(
        n=Count("id"), oldest=Min("created"), failing=Count("id", filter=Q(attempts__gt=0))
    )
    last_error = unsent.exclude(last_error="").order_by("-id").values_list("last_error", flat=True).first()
    due = Action.objects.filter(done_at__isnull=True, due_at__lte=now).filter(
        Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    )
    actions = due.aggregate(n=Count("id"), oldest=Min("due_at"))
    pending = FlowExecution.objects.filter(status=ExecutionStatus.PENDING).aggregate(
        n=Count("id"), oldest=Min("created")
    )
    return {
        "outbox": outbox["n"],
        "outbox_failing": outbox["failing"],
        "outbox_age": _age(outbox["oldest"], now),
        "outbox_error": last_error or "",
        "actions_due": actions["n"],
        "action_lag": _age(actions["oldest"], now),
        "pending": pending["n"],
        "pending_age": _age(pending["oldest"], now),
    }


def executor_rows(now: datetime) -> list[dict[str, Any]]:
    checks = {
        row.target: row
        for row in HealthCheck.objects.filter(kind="spark_master").only("target", "status", "message")
    }
    late = now - timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS)
    rows = []
    for executor in SpecExecutor.objects.order_by("name"):
        rows.append(
            {
                "executor": executor,
                "spark_check": checks.get(executor.spark_master),
                "heartbeat_late": bool(executor.last_heartbeat and executor.last_heartbeat < late),
            }
        )
    return rows


def worker_rows(now: datetime) -> list[dict[str, Any]]:
    late = now - timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS)
    return [
        {"worker": worker, "alive": worker.last_seen >= late}
        for worker in WorkerHeartbeat.objects.order_by("-last_seen")[: LIST_LIMIT * 2]
    ]


def dashboard_context(now: datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    running, running_total = running_rows()
    return {
        "now": now,
        "counts": status_counts(now),
        "running": running,
        "running_total": running_total,
        # Matches the execution_status_ended index (failed executions have their end time).
        "failures": FlowExecution.objects.filter(status=ExecutionStatus.FAILED).order_by("-ended_at", "-id")[
            :LIST_LIMIT
        ],
        "sla_events": Event.objects.filter(kind__startswith="sla.")[:LIST_LIMIT],
        "stale_datasets": freshness.stale_goals(LIST_LIMIT),
        "other_events": Event.objects.exclude(kind__startswith="sla.")[:LIST_LIMIT],
        "executors": executor_rows(now),
        "workers": worker_rows(now),
        "checks": HealthCheck.objects.exclude(kind="executor").order_by("kind", "target"),
        "backlog": backlog(now),
        "finished_statuses": FINISHED_STATUSES,
        "refresh_seconds": settings.MONITORING_DASHBOARD_REFRESH_SECONDS,
    }
