"""History over time: a flow's executions (records processed and duration
per run) and a dataset's watermarks (the state store's history rows)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db.models import Prefetch
from django.utils import timezone

from portal.accounts.access import Principal
from portal.events.links import execution_path
from portal.flows.models import FlowConfig
from portal.monitoring.charts import (
    TIME_STEPS,
    ChartPoint,
    format_count,
    format_duration,
    format_time,
    time_series_svg,
)
from portal.orchestration.models import (
    DatasetState,
    DatasetStateHistory,
    ExecutionStatus,
    FlowExecution,
    JobExecution,
    final_hops,
)
from portal.orchestration.state import statestore
from portal.pipeline.watermarks import value_of

# Runs that did something: their records and duration mean something.
CHARTED_STATUSES = [ExecutionStatus.COMMITTED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED]
UNFINISHED = [ExecutionStatus.PENDING, ExecutionStatus.COMPILED, ExecutionStatus.RUNNING]
DURATION_STEPS = TIME_STEPS
FILE_WATERMARK = re.compile(r"^(\d{13,15}):")


@dataclass
class RunRow:
    execution: FlowExecution
    records: int
    duration: float | None

    @property
    def path(self) -> str:
        e = self.execution
        return execution_path(e.flow_group, e.flow_name, e.execution_id)


def flow_history_visible(user: Principal, flow_group: str, flow_name: str) -> bool:
    """A flow's history may be seen by whoever may see the flow (one rule:
    FlowConfig.visible_to); the history of a deleted flow, by anyone signed in."""
    flows = FlowConfig.objects.filter(flow_group=flow_group, flow_name=flow_name)
    if flows.exists():
        return FlowConfig.objects.restrict(user).filter(pk__in=flows.values("pk")).exists()
    return bool(user.is_authenticated)


def flow_has_history(flow_group: str, flow_name: str) -> bool:
    """The flow exists, or did and still has executions kept."""
    return (
        FlowConfig.objects.filter(flow_group=flow_group, flow_name=flow_name).exists()
        or FlowExecution.objects.filter(flow_group=flow_group, flow_name=flow_name).exists()
    )


def flow_runs(flow_group: str, flow_name: str, limit: int | None = None) -> list[RunRow]:
    """The flow's last finished runs, oldest first, with the records their final hops delivered."""
    limit = limit or settings.MONITORING_CHART_RUNS
    executions = list(
        FlowExecution.objects.filter(flow_group=flow_group, flow_name=flow_name, status__in=CHARTED_STATUSES)
        .prefetch_related(
            Prefetch(
                "jobs",
                queryset=JobExecution.objects.only("execution_id", "job_name", "parents", "processed_count"),
            )
        )
        .order_by("-execution_id")[:limit]
    )
    rows = []
    for execution in reversed(executions):
        start, end = execution.started_at or execution.created, execution.ended_at
        duration = (end - start).total_seconds() if end else None
        records = sum(job.processed_count for job in final_hops(execution.jobs.all()))
        rows.append(RunRow(execution, records, duration))
    return rows


def _run_label(row: RunRow, what: str) -> str:
    e = row.execution
    when = timezone.localtime(e.started_at or e.created).strftime("%Y-%m-%d %H:%M:%S")
    return f"Execution {e.execution_id} ({e.status.lower()}, {when}): {what}"


def flow_chart_context(flow_group: str, flow_name: str) -> dict[str, Any]:
    runs = flow_runs(flow_group, flow_name)
    chart_id = re.sub(r"[^A-Za-z0-9_-]", "-", f"{flow_group}-{flow_name}")
    record_points = [
        ChartPoint(
            r.execution.started_at or r.execution.created,
            r.records,
            _run_label(r, f"{r.records:,} records"),
            css=r.execution.status.lower(),
            key=str(r.execution.execution_id),
        )
        for r in runs
    ]
    duration_points = [
        ChartPoint(
            r.execution.started_at or r.execution.created,
            r.duration,
            _run_label(r, format_duration(r.duration)),
            css=r.execution.status.lower(),
            key=str(r.execution.execution_id),
        )
        for r in runs
        if r.duration is not None
    ]
    count = len(runs)
    return {
        "flow_group": flow_group,
        "flow_name": flow_name,
        "slug": chart_id,
        "runs": runs,
        "records_svg": time_series_svg(
            record_points,
            chart_id=f"records-{chart_id}",
            title=f"Records processed per execution of {flow_group}/{flow_name}",
            description=f"{count} finished executions, oldest on the left; failed runs in red.",
        ),
        "duration_svg": time_series_svg(
            duration_points,
            chart_id=f"duration-{chart_id}",
            title=f"Duration of each execution of {flow_group}/{flow_name}",
            description=f"{len(duration_points)} finished executions, oldest on the left; failed runs in red.",
            y_format=format_duration,
            y_steps=DURATION_STEPS,
        ),
        "datasets": statestore.states_of(flow_group, flow_name).order_by("job_name", "dataset_urn"),
        "running": FlowExecution.objects.filter(
            flow_group=flow_group, flow_name=flow_name, status__in=UNFINISHED
        ).exists(),
        "refresh_seconds": settings.MONITORING_CHART_REFRESH_SECONDS,
    }


# --- watermarks --------------------------------------------------------------------------------


def watermark_point(watermark: str) -> tuple[str, float] | None:
    """('number', n) or ('time', epoch seconds) for a plottable watermark:
    a number, an ISO date/time, or a file watermark `<mtime ms>:<path>`.
    Look-back watermarks ({"value": ..., "seen": [...]}) plot their value."""
    value = (value_of(watermark) or "").strip()
    if not value:
        return None
    match = FILE_WATERMARK.match(value)
    if match:
        return "time", int(match.group(1)) / 1000
    try:
        number = float(value)
    except ValueError:
        pass
    else:
        return ("number", number) if number == number and abs(number) != float("inf") else None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return "time", moment.timestamp()


@dataclass
class HistoryRow:
    entry: DatasetStateHistory
    value: str  # the plain watermark value shown

    @property
    def path(self) -> str:
        state = self.entry.state
        if self.entry.execution_id is None:
            return ""
        return execution_path(state.flow_group, state.flow_name, self.entry.execution_id)


def dataset_context(state: DatasetState) -> dict[str, Any]:
    limit = settings.MONITORING_CHART_RUNS * 4
    entries = list(state.history.select_related("state").order_by("-created", "-id")[:limit])
    rows = [HistoryRow(entry, value_of(entry.watermark) or "") for entry in entries]
    parsed = [(entry, watermark_point(entry.watermark)) for entry in reversed(entries)]
    kinds = Counter(point[0] for _entry, point in parsed if point)
    kind = kinds.most_common(1)[0][0] if kinds else None
    points = [
        ChartPoint(
            entry.created,
            point[1],
            f"{value_of(entry.watermark)} ({entry.status.lower()})",
            entry.status.lower(),
            str(entry.pk),
        )
        for entry, point in parsed
        if point and point[0] == kind
    ]
    slug = f"dataset-{state.pk}"
    watermark_svg = ""
    if points:
        # The labels' precision follows the axis, which spans at least the hour a lone point gets.
        span = max(3600.0, max(p.value for p in points) - min(p.value for p in points))
        watermark_svg = time_series_svg(
            points,
            chart_id=f"{slug}-watermark",
            title=f"Watermark of {state.dataset_urn} after each run",
            description=f"{len(points)} watermarks ({'times' if kind == 'time' else 'numbers'}), oldest on the left.",
            y_format=(lambda v: format_time(v, span)) if kind == "time" else format_count,
            y_from_zero=False,
            y_steps=TIME_STEPS if kind == "time" else None,
        )
    records_svg = time_series_svg(
        [
            ChartPoint(
                e.created,
                e.records,
                f"{e.records:,} records ({e.status.lower()})",
                e.status.lower(),
                str(e.pk),
            )
            for e in reversed(entries)
        ],
        chart_id=f"{slug}-records",
        title=f"Records per run of {state.dataset_urn}",
        description=f"{len(entries)} runs, oldest on the left.",
    )
    return {
        "state": state,
        "flow_exists": FlowConfig.objects.filter(
            flow_group=state.flow_group, flow_name=state.flow_name
        ).exists(),
        "current": value_of(state.watermark) or "",
        "rows": rows,
        "limited": len(entries) == limit,
        "watermark_svg": watermark_svg,
        "watermark_kind": kind,
        "unplotted": len(entries) - len(points),
        "records_svg": records_svg,
        "execution_url": execution_path(state.flow_group, state.flow_name, state.execution_id)
        if state.execution_id is not None
        else "",
    }
