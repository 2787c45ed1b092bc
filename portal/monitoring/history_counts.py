"""The /metrics figures that aggregate the whole history (executions and jobs
by status, job durations, records, events), kept by the scheduler in slices.

Counting ten million job executions takes seconds, and a pass that recounts
everything costs more the longer the portal runs. So each history table is
cut into slices of SLICE_ROWS primary keys, each slice's counts are stored
(MetricsSnapshot.slices) and the figures are their sums. A pass recounts the
newest HOT_SLICES slices of each table (where rows are being written) and
the slices whose number of unfinished rows moved (a run started or ended
there: found over the status index, so it reads what is in flight, not the
history), then the slices never counted yet, then the older ones in turn, for
as long as PASS_BUDGET_SECONDS lasts (at least one): its cost is bounded
whatever the size of the history. Any other change to an old row (a pruned
month, a finished run edited) shows once the turn comes back to its slice,
and a slice emptied by retention drops out.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, models, transaction
from django.db.models import Count, DurationField, ExpressionWrapper, F, Max, Min, Q, Sum
from django.utils import timezone

from portal.events.models import Event
from portal.monitoring.models import MetricsSnapshot
from portal.orchestration.models import ExecutionStatus, FlowExecution, JobExecution, JobStatus

# Job durations run from seconds to hours.
DURATION_BUCKETS = (5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
SLICE_ROWS = 50_000
HOT_SLICES = 2
PASS_BUDGET_SECONDS = 0.25

Counts = dict[str, Any]


def _execution_counts(lo: int, hi: int) -> Counts:
    rows = FlowExecution.objects.filter(pk__gte=lo, pk__lt=hi).values_list("status").annotate(n=Count("id"))
    return {"status": dict(rows.order_by())}


def _job_counts(lo: int, hi: int) -> Counts:
    jobs = JobExecution.objects.filter(pk__gte=lo, pk__lt=hi)
    duration = ExpressionWrapper(F("ended_at") - F("started_at"), output_field=DurationField())
    finished = jobs.filter(
        status__in=[JobStatus.COMMITTED, JobStatus.FAILED, JobStatus.CANCELLED],
        started_at__isnull=False,
        ended_at__isnull=False,
    ).annotate(duration=duration)
    buckets = {
        f"le_{i}": Count("id", filter=Q(duration__lte=timedelta(seconds=bound)))
        for i, bound in enumerate(DURATION_BUCKETS)
    }
    durations = []
    for row in (
        finished.values("executor", "status")
        .annotate(count=Count("id"), total=Sum("duration"), **buckets)
        .order_by()
    ):
        record: dict[str, Any] = dict(row)  # plus the bucket counts, which the row's type cannot name
        total = record.pop("total")
        record["seconds"] = total.total_seconds() if isinstance(total, timedelta) else float(total or 0) / 1e6
        durations.append(record)
    records = (
        jobs.filter(status=JobStatus.COMMITTED)
        .values_list("executor")
        .annotate(total=Sum("processed_count"))
        .order_by()
    )
    return {
        "status": dict(jobs.values_list("status").annotate(n=Count("id")).order_by()),
        "records": {executor: total or 0 for executor, total in records},
        "durations": durations,
    }


def _event_counts(lo: int, hi: int) -> Counts:
    rows = Event.objects.filter(pk__gte=lo, pk__lt=hi).values_list("kind").annotate(n=Count("id"))
    return {"kind": dict(rows.order_by())}


@dataclass(frozen=True)
class Table:
    model: type[models.Model]
    count: Callable[[int, int], Counts]
    # Statuses a row leaves later: a slice whose number of such rows moved is recounted at once.
    unfinished: tuple[str, ...] = ()


TABLES: dict[str, Table] = {
    "executions": Table(
        FlowExecution,
        _execution_counts,
        (ExecutionStatus.PENDING, ExecutionStatus.COMPILED, ExecutionStatus.RUNNING),
    ),
    "jobs": Table(JobExecution, _job_counts, (JobStatus.PENDING, JobStatus.ORCHESTRATED, JobStatus.RUNNING)),
    "events": Table(Event, _event_counts),
}


def _add(into: dict[str, float], counts: dict[str, float]) -> None:
    for key, n in counts.items():
        into[key] = into.get(key, 0) + n


def _totals(slices: dict[str, dict[str, Counts]]) -> dict[str, Any]:
    """The figures /metrics reads: the sums of every table's slices."""
    executions: dict[str, float] = {}
    jobs: dict[str, float] = {}
    records: dict[str, float] = {}
    durations: dict[tuple[str, str], dict[str, Any]] = {}
    events: dict[str, float] = {}
    for counts in slices.get("executions", {}).values():
        _add(executions, counts["status"])
    for counts in slices.get("jobs", {}).values():
        _add(jobs, counts["status"])
        _add(records, counts["records"])
        for row in counts["durations"]:
            key = (row["executor"], row["status"])
            if key not in durations:
                durations[key] = {"executor": row["executor"], "status": row["status"]}
            _add(durations[key], {k: v for k, v in row.items() if k not in ("executor", "status")})
    for counts in slices.get("events", {}).values():
        _add(events, counts["kind"])
    return {
        "computed": timezone.now().isoformat(),
        "executions": executions,
        "jobs": jobs,
        "records": sorted(records.items()),
        "durations": [durations[key] for key in sorted(durations)],
        "events": sorted(events.items()),
    }


def _moved(table: Table, stored: dict[str, Counts]) -> set[int]:
    """Slices whose unfinished rows are not what was counted: a run started or
    ended there. Read over the status index: as many rows as are in flight."""
    if not table.unfinished:
        return set()
    now = dict(
        table.model._default_manager.filter(status__in=table.unfinished)
        .annotate(slice=F("pk") / SLICE_ROWS)
        .values_list("slice")
        .annotate(n=Count("pk"))
        .order_by()
    )
    before = {
        int(key): sum(counts["status"].get(status, 0) for status in table.unfinished)
        for key, counts in stored.items()
    }
    return {index for index in now.keys() | before.keys() if now.get(index, 0) != before.get(index, 0)}


def _recount(
    table: Table, stored: dict[str, Counts], turn: int, deadline: float
) -> tuple[dict[str, Counts], int]:
    """One table's pass: its hot and moved slices, then uncounted ones, then
    the next in turn until the deadline (at least one). Returns the slices and
    where the turn goes on next time."""
    bounds = table.model._default_manager.aggregate(lo=Min("pk"), hi=Max("pk"))
    if bounds["lo"] is None:
        return {}, 0
    first, last = bounds["lo"] // SLICE_ROWS, bounds["hi"] // SLICE_ROWS
    # Slices emptied by retention (below the oldest row) drop out.
    slices = {key: counts for key, counts in stored.items() if first <= int(key) <= last}
    cold_last = last - HOT_SLICES
    now = {i for i in set(range(cold_last + 1, last + 1)) | _moved(table, slices) if first <= i <= last}
    for index in sorted(now):
        slices[str(index)] = table.count(index * SLICE_ROWS, (index + 1) * SLICE_ROWS)
    cold = [i for i in range(first, cold_last + 1) if i not in now]
    if not cold:
        return slices, 0
    # Never counted first (a new portal, an upgrade), then the others in turn.
    start = cold.index(turn) if turn in cold else 0
    order = [i for i in cold if str(i) not in slices] + [
        i for i in cold[start:] + cold[:start] if str(i) in slices
    ]
    for done, index in enumerate(order):
        if done and time.monotonic() >= deadline:
            return slices, index
        slices[str(index)] = table.count(index * SLICE_ROWS, (index + 1) * SLICE_ROWS)
    return slices, first


def refresh_history_snapshot() -> dict[str, Any]:
    """One bounded pass (see the module's docstring); several schedulers may
    call it at once: one does the pass, the others leave it and read its figures."""
    deadline = time.monotonic() + PASS_BUDGET_SECONDS
    with contextlib.suppress(IntegrityError):  # created by another scheduler at the same moment
        MetricsSnapshot.objects.get_or_create(pk=1)
    with transaction.atomic():
        snapshot = MetricsSnapshot.objects.select_for_update(skip_locked=True).filter(pk=1).first()
        if snapshot is None:  # another scheduler is counting
            return history_snapshot()
        stored = snapshot.slices or {}
        turns = stored.get("turn", {})
        slices: dict[str, dict[str, Counts]] = {}
        for name, table in TABLES.items():
            slices[name], turns[name] = _recount(table, stored.get(name, {}), turns.get(name, 0), deadline)
        snapshot.slices = {**slices, "turn": turns}
        snapshot.data = _totals(slices)
        snapshot.save(update_fields=["slices", "data", "updated"])
        return snapshot.data


def history_snapshot() -> dict[str, Any]:
    """The stored figures; one pass here only before any scheduler has made one."""
    row = MetricsSnapshot.objects.filter(pk=1).values_list("data", flat=True).first()
    return row if row else refresh_history_snapshot()
