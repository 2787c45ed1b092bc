"""What a backfill range meets in a flow's dataset state: the loads each hop recorded (from the
watermark history), whether a range matches any of them, and what replaying it does at each
destination. Read before a backfill is launched; nothing here writes."""

from __future__ import annotations

from portal.flows.models import FlowConfig
from portal.orchestration.models import DatasetState
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
