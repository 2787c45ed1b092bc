"""History retention: finished executions (with their jobs, job states and
log files), events, done actions and sent outbox rows older than the
retention are deleted in small batches by the scheduler, so history stays
bounded and no single DELETE holds locks for long.

Never pruned: watermarks (DatasetState), a watermark's history within the
retention and each watermark's latest history row whatever its age, commit
steps (CommitStore*: an unfinished commit must stay redoable) and any
execution that still has unfinished commit steps or has not finished.

The retention is HISTORY_RETENTION_DAYS (default 90); a flow may keep its
history longer or shorter with the property `flow.retentionDays`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Model, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from portal.bulk import any_of, delete_rows
from portal.events.models import Event
from portal.flows.models import FlowConfig
from portal.flows.policies import RETENTION_DAYS, retention_days
from portal.orchestration.models import (
    FINISHED_STATUSES,
    Action,
    CommitStoreDataset,
    DatasetStateHistory,
    FlowExecution,
    JobExecution,
    JobState,
    OutboxMessage,
)
from portal.orchestration.state import joblogs

BATCH_SIZE = 500

logger = logging.getLogger(__name__)


@dataclass
class PruneReport:
    executions: int = 0
    jobs: int = 0
    events: int = 0
    actions: int = 0
    outbox: int = 0
    watermark_history: int = 0
    log_files: int = 0
    by_table: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.executions + self.events + self.actions + self.outbox + self.watermark_history


def _overrides() -> dict[tuple[str, str], int]:
    """Flows with their own retention: few, so read them each pass."""
    found: dict[tuple[str, str], int] = {}
    rows = FlowConfig.objects.filter(properties__has_key=RETENTION_DAYS).values_list(
        "flow_group", "flow_name", "properties"
    )
    for group, name, props in rows:
        with contextlib.suppress(ValidationError):  # validated on save; never stop pruning for one
            found[(group, name)] = retention_days(props)
    return found


def _scopes(now: datetime) -> list[tuple[dict[tuple[str, str], bool], datetime]]:
    """(flows, cutoff) pairs: one per overriding flow, then every other flow
    (`{key: False}` = all but these)."""
    default_cutoff = now - timedelta(days=settings.HISTORY_RETENTION_DAYS)
    overrides = _overrides()
    scopes = [({key: True}, now - timedelta(days=days)) for key, days in overrides.items()]
    scopes.append((dict.fromkeys(overrides, False), default_cutoff))
    return scopes


def _q(flows: dict[tuple[str, str], bool], prefix: str = "") -> Q:
    condition = Q()
    for (group, name), inside in flows.items():
        one = Q(**{f"{prefix}flow_group": group, f"{prefix}flow_name": name})
        condition &= one if inside else ~one
    return condition


def _prune_executions(scope: Q, cutoff: datetime, limit: int, report: PruneReport) -> int:
    unfinished_commits = CommitStoreDataset.objects.filter(execution_id__isnull=False).values("execution_id")
    with transaction.atomic():
        executions = dict(
            FlowExecution.objects.filter(scope, created__lt=cutoff, status__in=FINISHED_STATUSES)
            .exclude(execution_id__in=unfinished_commits)
            .order_by("created")
            .select_for_update(skip_locked=True)
            .values_list("pk", "execution_id")[:limit]
        )
        if not executions:
            return 0
        ids = any_of(list(executions))
        logs = list(
            JobExecution.objects.filter(execution_id__in=ids).values_list(
                "execution_id", "job_name", "attempt"
            )
        )
        # Children first, one DELETE each, no row read into Python (see bulk.delete_rows):
        # tests/unit/orchestration/state/test_retention.py checks no other table refers to them.
        delete_rows(JobState.objects.filter(job__execution_id__in=ids))
        delete_rows(JobExecution.objects.filter(execution_id__in=ids))
        delete_rows(FlowExecution.objects.filter(pk__in=ids))
    report.executions += len(executions)
    report.jobs += len(logs)
    _remove_logs([(executions[pk], job_name, attempts) for pk, job_name, attempts in logs], report)
    return len(executions)


def _remove_logs(logs: list[tuple[int, str, int]], report: PruneReport) -> None:
    """The pruned jobs' log files; an execution's folder is looked at only if it is there."""
    by_execution: dict[int, list[tuple[str, int]]] = {}
    for execution_id, job_name, attempts in logs:
        by_execution.setdefault(execution_id, []).append((job_name, attempts))
    # Most runs' folders are gone or were never made here: look with plain strings first.
    root = joblogs.log_path(0, "-", 1).parent.parent
    for execution_id, jobs in by_execution.items():
        if not os.path.isdir(f"{root}/{execution_id}"):
            continue
        folder = root / str(execution_id)
        for job_name, attempts in jobs:
            for attempt in range(1, attempts + 1):
                driver = joblogs.driver_log_path(execution_id, job_name, attempt)
                for path in (
                    joblogs.log_path(execution_id, job_name, attempt),
                    driver,
                    joblogs.masked_marker(driver),
                ):
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                        report.log_files += 1
        with contextlib.suppress(OSError):  # holds something else (another flow's run of that id): keep it
            folder.rmdir()


def _prune_simple(queryset: QuerySet[Model], limit: int, oldest_first: str = "pk") -> int:
    """Oldest first over the index `oldest_first` leads (the table's age column)."""
    with transaction.atomic():
        ids = list(queryset.order_by(oldest_first).values_list("pk", flat=True)[:limit])
        if ids:
            delete_rows(queryset.model._default_manager.filter(pk__in=any_of(ids)))
    return len(ids)


def prune_once(now: datetime | None = None, limit: int = BATCH_SIZE) -> PruneReport:
    """One small batch of each kind of history; call until `total` is 0."""

    now = now or timezone.now()
    report = PruneReport()
    default_cutoff = now - timedelta(days=settings.HISTORY_RETENTION_DAYS)
    # Watermark history beyond the retention, except each watermark's latest row.
    latest = (
        DatasetStateHistory.objects.filter(state=OuterRef("state"))
        .order_by("-created", "-id")
        .values("id")[:1]
    )
    for flows, cutoff in _scopes(now):
        scope = _q(flows)
        _prune_executions(scope, cutoff, limit, report)
        report.events += _prune_simple(Event.objects.filter(scope, created__lt=cutoff), limit, "created")
        report.actions += _prune_simple(Action.objects.filter(scope, done_at__lt=cutoff), limit, "done_at")
        report.watermark_history += _prune_simple(
            DatasetStateHistory.objects.filter(_q(flows, "state__"), created__lt=cutoff).exclude(
                id=Subquery(latest)
            ),
            limit,
        )
    report.outbox += _prune_simple(OutboxMessage.objects.filter(sent_at__lt=default_cutoff), limit, "sent_at")
    return report


def prune_history(budget_seconds: float = 1.0, now: datetime | None = None) -> PruneReport:
    """Batches until nothing is left or the time budget is spent (the
    scheduler calls this every HISTORY_PRUNE_SECONDS)."""
    total = PruneReport()
    deadline = time.monotonic() + budget_seconds
    while True:
        report = prune_once(now)
        for name in ("executions", "jobs", "events", "actions", "outbox", "watermark_history", "log_files"):
            setattr(total, name, getattr(total, name) + getattr(report, name))
        if not report.total or time.monotonic() >= deadline:
            break
    if total.total:
        logger.info(
            "retention: pruned %d execution(s), %d job(s), %d event(s), %d action(s), %d outbox row(s), "
            "%d watermark history row(s)",
            total.executions,
            total.jobs,
            total.events,
            total.actions,
            total.outbox,
            total.watermark_history,
        )
    return total
