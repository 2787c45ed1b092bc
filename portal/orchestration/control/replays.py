"""Re-reading what committed executions loaded, without adding it twice.

A backfill, and a re-run of a committed execution (a backfill of exactly the ranges that execution
loaded, :func:`replay`), read again rows a destination already holds. JDBC destinations delete the
range's rows first, partitioned files datasets and the replacing write modes replace what they
cover (:mod:`portal.pipeline.destinations.commitplan`). An appending files dataset without partitions has no
range to delete by; what it can replace are the *files* the re-read loads published. So the
orchestrator, which recorded each load (``DatasetStateHistory``: from, to, execution) and the files
each committed job published (its task states), tells the backfill's first job which of the
dataset's files those loads published (:func:`published_by`, JobSpec ``backfill_replaces``), and
the publish swaps them for the backfill's own in one folder exchange
(:class:`portal.pipeline.destinations.files_replace.FsReplaceCommitStep`, mode ``swap``).

A range has to cover whole loads for that: a bound inside a load is moved out to the load's edge
(:func:`whole_loads`), so no row of a load is kept twice or lost. Earlier backfills and re-runs of
the same range are loads too (their range is in their job's JobSpec), so a second re-run replaces
the first's files.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from portal.accounts.access import Principal
from portal.orchestration.control import commands
from portal.orchestration.models import (
    DatasetState,
    DatasetStateHistory,
    FlowExecution,
    JobExecution,
    JobStatus,
)
from portal.pipeline import backfills

REPLACES = "backfill_replaces"


def loads_of(execution: FlowExecution) -> dict[str, dict[str, str | None]]:
    """``{urn: {low, high}}``: the ranges a committed execution loaded (a backfill: its own ranges)."""
    if execution.backfill:
        return {urn: {"low": b.get("low"), "high": b["high"]} for urn, b in execution.backfill.items()}
    ranges: dict[str, dict[str, str | None]] = {}
    rows = DatasetStateHistory.objects.filter(
        execution_id=execution.execution_id,
        state__flow_group=execution.flow_group,
        state__flow_name=execution.flow_name,
        status="COMMITTED",
    ).select_related("state")
    for row in rows:
        if not row.watermark or row.watermark == row.previous_watermark:
            continue  # the run read nothing new of that dataset
        low, high = row.previous_watermark or None, row.watermark
        seen = ranges.get(row.state.dataset_urn)
        if seen:  # several hops of one dataset: the widest range
            low = None if not low or not seen["low"] else min(low, seen["low"], key=_key)
            high = max(high, seen["high"] or high, key=_key)
        ranges[row.state.dataset_urn] = {"low": low, "high": high}
    return ranges


def _key(bound: str | None) -> tuple[int, str, Any]:
    """Comparable: bounds of one kind by value; of different kinds (a user's slip) by kind, never a
    TypeError while the job is bound."""
    found = backfills.bound_key(bound)
    return (1, found[0], found[1]) if found else (0, "", bound or "")


def _inside(low: str | None, high: str | None, span_low: str | None, span_high: str) -> bool:
    """Whether the load ``(low, high]`` lies inside the backfill ``(span_low, span_high]``."""
    return (span_low is None or (low is not None and _key(span_low) <= _key(low))) and _key(high) <= _key(
        span_high
    )


def _meets(low: str | None, high: str, span_low: str | None, span_high: str) -> bool:
    return (span_low is None or _key(span_low) < _key(high)) and (low is None or _key(low) < _key(span_high))


def _history(flow_group: str, flow_name: str, job_name: str, urn: str) -> list[DatasetStateHistory]:
    states = DatasetState.objects.filter(
        flow_group=flow_group, flow_name=flow_name, job_name=job_name, dataset_urn=urn
    )
    return list(
        DatasetStateHistory.objects.filter(state__in=states, status="COMMITTED").exclude(watermark="")
    )


def whole_loads(
    flow_group: str, flow_name: str, job_name: str, urn: str, low: str | None, high: str
) -> tuple[str | None, str]:
    """``(low, high]`` widened to the edges of the recorded loads it cuts through."""
    for row in _history(flow_group, flow_name, job_name, urn):
        load_low, load_high = row.previous_watermark or None, row.watermark
        if not _meets(load_low, load_high, low, high):
            continue
        if low is not None and (load_low is None or _key(load_low) < _key(low)):
            low = load_low
        if _key(load_high) > _key(high):
            high = load_high
    return low, high


def published_by(
    flow_group: str, flow_name: str, job_name: str, urn: str, low: str | None, high: str
) -> list[dict[str, Any]]:
    """The files (branch, path relative to the dataset's folder) that the committed loads and
    backfills of ``urn`` by ``job_name`` inside ``(low, high]`` published."""
    ranges: dict[int, tuple[str | None, str]] = {
        row.execution_id: (row.previous_watermark or None, row.watermark)
        for row in _history(flow_group, flow_name, job_name, urn)
        if row.execution_id is not None
    }
    jobs = JobExecution.objects.filter(
        execution__flow_group=flow_group,
        execution__flow_name=flow_name,
        job_name=job_name,
        status=JobStatus.COMMITTED,
    ).select_related("execution")
    found: list[dict[str, Any]] = []
    for job in jobs:
        bounds = ((job.spec or {}).get("backfill") or {}).get(urn)
        span = (bounds.get("low"), bounds["high"]) if bounds else ranges.get(job.execution.execution_id)
        if span is None or not _inside(span[0], span[1], low, high):
            continue
        for state in job.task_states or []:
            if state.get("dataset_urn") != urn:
                continue
            for branch in state.get("branches") or []:
                base = (branch.get("output_dir") or "").rstrip("/")
                for f in branch.get("output_files") or []:
                    path = str(f.get("path") or "")
                    if base and path.startswith(base):
                        found.append(
                            {"branch": branch.get("index", 0), "relative": path[len(base) :].lstrip("/\\")}
                        )
    return found


def bind(spec: dict[str, Any], destination_kind: str) -> None:
    """A backfill's first job whose destination is files: its ranges widened to whole loads and the
    files those loads published named in ``backfill_replaces`` (see the module docstring)."""
    if destination_kind != "files" or not spec.get("backfill"):
        return
    group, name, job = spec["flow_group"], spec["flow_name"], spec["job_name"]
    replaces: dict[str, list[dict[str, Any]]] = {}
    for urn, bounds in spec["backfill"].items():
        low, high = whole_loads(group, name, job, urn, bounds.get("low"), bounds["high"])
        spec["backfill"][urn] = {"low": low, "high": high}
        replaces[urn] = published_by(group, name, job, urn, low, high)
    spec[REPLACES] = replaces


def replay(execution: FlowExecution, *, user: Principal) -> FlowExecution:
    """Run a committed execution again: a backfill of exactly the ranges it loaded, so every
    destination replaces what it reads again (a ValidationError when it loaded nothing)."""

    if execution.status != "COMMITTED" or execution.flow is None:
        raise commands.NotAllowedNow(
            f"Only a committed execution of an existing flow is re-read; {execution.execution_id} is "
            f"{execution.status}."
        )
    ranges = loads_of(execution)
    if not ranges:
        raise ValidationError(
            {"execution": f"Execution {execution.execution_id} loaded no records to read again."}
        )
    return commands.run_now(execution.flow, user=user, backfill=ranges)
