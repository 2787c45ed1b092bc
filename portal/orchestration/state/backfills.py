"""What a backfill range meets in a flow's dataset state: the loads each hop recorded (from the
watermark history), whether a range matches any of them, and what replaying it does at each
destination. Read before a backfill is launched; nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass

from portal.flows.models import FlowConfig
from portal.orchestration.models import DatasetState, DatasetStateHistory
from portal.pipeline import backfills
from portal.pipeline.destinations.write_modes import backfill_replacement
from portal.topology.models import DataNode


def _loads(flow: FlowConfig, urn: str) -> list[tuple[str, str | None, str]]:
    """(hop, loaded from, loaded up to) of each hop's recorded loads of `urn`."""
    found = []
    states = DatasetState.objects.filter(
        flow_group=flow.flow_group, flow_name=flow.flow_name, dataset_urn=urn
    )
    for state in states:
        first = state.history.order_by("created", "id").first()
        found.append((state.job_name, (first.previous_watermark or None) if first else None, state.watermark))
    return found


def backfill_refusal(flow: FlowConfig, urn: str, low: str | None, high: str) -> str | None:
    """Why a backfill range of `urn` matches nothing the flow has loaded (None: it may match, or
    no load is recorded to judge by). The range is held against every hop's history; one hop
    whose loads it meets is enough."""
    recorded = _loads(flow, urn)
    if not recorded and (known := _datasets(flow)):  # the flow has loaded others, never this one
        listed = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
        return f"{urn}: the flow has loaded no dataset of that name (its datasets: {listed})"
    loads = [(hop, f, t) for hop, f, t in recorded if t]
    reasons = [backfills.refusal(low, high, loaded_from, loaded_to) for _, loaded_from, loaded_to in loads]
    if not loads or not all(reasons):
        return backfills.refusal(low, high, None, None) if low else None
    return f"{urn}: {reasons[0]}"


def _datasets(flow: FlowConfig) -> list[str]:
    """The datasets the flow has recorded a state for (its own: a few per flow, indexed)."""
    states = DatasetState.objects.filter(flow_group=flow.flow_group, flow_name=flow.flow_name)
    return sorted(set(states.values_list("dataset_urn", flat=True)))


def backfill_preview(flow: FlowConfig, urn: str, low: str | None, high: str) -> list[dict[str, str]]:
    """What the backfill does at each destination of the flow, in words (the page shows it first)."""
    dag = getattr(getattr(flow, "compiled_dag", None), "dag", None) or {}
    stored = {hop: to for hop, _, to in _loads(flow, urn)}
    kinds = dict(DataNode.objects.values_list("name", "kind"))
    shown = []
    for job in dag.get("jobs", []):
        node = job.get("destinationNode") or ""
        properties = job.get("properties") or {}
        kind = properties.get("flowport.hop.destination.kind") or kinds.get(node, "files")
        text = backfill_replacement(properties, kind, urn, low, high, stored.get(job.get("jobName", "")))
        shown.append({"destination": node, "kind": kind, "text": text})
    return shown


# The newest loads of a dataset an estimate reads (per hop): a bounded, indexed read of the
# watermark history, never of the source's table.
ESTIMATE_LOADS = 500
# What a load's history row says it was: a run that committed rows (not a reset, skip or adoption).
_LOAD_STATUSES = ("COMMITTED", "SUCCEEDED")


@dataclass(frozen=True)
class BackfillEstimate:
    """The range a backfill reads, in words, and the rows it is likely to read again: the records
    of the recorded loads whose range meets it (a load partly inside counts whole, so it is an
    upper estimate), or None when no recorded load can say (unknown). `whole_after`/`whole_up_to`:
    the range widened to the edges of the loads it cuts through, as an appending files destination
    replaces whole loads (orchestration.control.replays.whole_loads); equal to the range otherwise."""

    after: str  # "": from the first record
    up_to: str
    whole_after: str
    whole_up_to: str
    covered: str  # what the loads so far cover, in words ("" when none is recorded)
    rows: int | None
    loads: int

    @property
    def widened(self) -> bool:
        return (self.whole_after, self.whole_up_to) != (self.after, self.up_to)


def backfill_estimate(flow: FlowConfig, urn: str, low: str | None, high: str) -> BackfillEstimate:
    """The backfill's effective range and its likely rows, from the flow's recorded loads of `urn`
    (the watermark history: at most ESTIMATE_LOADS rows per hop, read by its index; the source
    itself is never counted, so a huge table costs nothing here)."""
    lo, hi = backfills.bound_key(low), backfills.bound_key(high)
    best: tuple[int, int, str | None, str] | None = None
    covered = ""
    states = DatasetState.objects.filter(
        flow_group=flow.flow_group, flow_name=flow.flow_name, dataset_urn=urn
    )
    for state in states:
        history = list(
            DatasetStateHistory.objects.filter(state=state, status__in=_LOAD_STATUSES)
            .order_by("-created", "-id")
            .values_list("previous_watermark", "watermark", "records")[:ESTIMATE_LOADS]
        )
        if not history:
            continue
        first_from = history[-1][0] or None
        covered = (
            f"from {backfills.shown(first_from) if first_from else 'the first record'} "
            f"up to {backfills.shown(state.watermark)}"
        )
        found = _overlapping(history, low, lo, high, hi)
        if found is not None and (best is None or found[0] > best[0]):
            best = found  # every hop carries the same rows: the largest count is the one
    whole_low, whole_high = (best[2], best[3]) if best else (low, high)
    return BackfillEstimate(
        after=backfills.shown(low) if low else "",
        up_to=backfills.shown(high),
        whole_after=backfills.shown(whole_low) if whole_low else "",
        whole_up_to=backfills.shown(whole_high),
        covered=covered,
        rows=None if best is None else best[0],
        loads=0 if best is None else best[1],
    )


Key = tuple[str, object]


def _overlapping(
    history: list[tuple[str, str, int]], low: str | None, lo: Key | None, high: str, hi: Key | None
) -> tuple[int, int, str | None, str] | None:
    """(rows, loads, widened low, widened high) of the loads that meet ``(low, high]``; None when a
    load's bounds cannot be held against the range (another kind of watermark)."""
    if hi is None:
        return None
    rows = loads = 0
    whole_low, whole_high = low, high
    for before, after, records in history:
        start, end = backfills.bound_key(before) if before else None, backfills.bound_key(after)
        if end is None or end[0] != hi[0] or (before and start is None):
            return None
        if lo is not None and not _after(end, lo):
            continue  # it ended at or before the range's start
        if start is not None and not _after(hi, start):
            continue  # it started at or after the range's end
        rows, loads = rows + records, loads + 1
        if whole_low is not None and (start is None or not _after(start, lo or start)):
            whole_low = before or None
        if _after(end, backfills.bound_key(whole_high) or hi):
            whole_high = after
    return rows, loads, whole_low, whole_high


def _after(a: Key, b: Key) -> bool:
    """a > b, both of one kind."""
    return bool(a[0] == b[0] and a[1] > b[1])  # type: ignore[operator]  # one kind: numbers or UTC times
