"""Flow versions: every save that changes what a flow says keeps the new
spec as a numbered version (who, when, what), so an execution can name the
version it compiled from, a page can show what changed between two, and a
re-run can compile an old one again.

Versions are made only by `record`, which `flows.services` calls inside the
saving transaction (after the row's UPDATE, whose lock orders two saves of
one flow): a view or the API cannot save a flow without making one. A save
that changes nothing (the same spec as the latest version) makes none, so
the history lists changes, not clicks."""

from __future__ import annotations

from typing import Any

from django.db.models import Max, QuerySet

from portal.flows.models import FlowConfig, FlowVersion

# What a flow says: its editable fields (the key and owner never change on a save).
SPEC_FIELDS = (
    "description",
    "schedule",
    "schedule_given",
    "run_immediately",
    "template_uris",
    "properties",
    "source",
    "destinations",
)


def spec_of(flow: FlowConfig) -> dict[str, Any]:
    spec: dict[str, Any] = {name: getattr(flow, name) for name in SPEC_FIELDS}
    spec["properties"] = dict(spec["properties"] or {})
    spec["destinations"] = list(spec["destinations"] or [])
    spec["owning_group"] = flow.owning_group.name if flow.owning_group is not None else ""
    return spec


def record(flow: FlowConfig, *, by: str) -> FlowVersion | None:
    """Keep the flow's spec as its next version, unless it equals the latest."""
    spec = spec_of(flow)
    latest = FlowVersion.objects.filter(flow=flow).order_by("-number").first()
    if latest is not None and latest.spec == spec:
        return None
    number = (latest.number if latest else 0) + 1
    return FlowVersion.objects.create(flow=flow, number=number, spec=spec, created_by=by)


def latest_number(flow: FlowConfig) -> int | None:
    number: int | None = FlowVersion.objects.filter(flow=flow).aggregate(n=Max("number"))["n"]
    return number


def versions_of(flow: FlowConfig) -> QuerySet[FlowVersion]:
    """A flow's versions, newest first. Callers got `flow` through the flow's
    access check: whoever may see a flow sees its versions, nobody else."""
    return FlowVersion.objects.filter(flow=flow).order_by("-number")


def as_flow(flow: FlowConfig, version: FlowVersion) -> FlowConfig:
    """An unsaved copy of `flow` saying what `version` said, for the compiler
    (an old execution re-run with the version it ran)."""
    old = FlowConfig(
        pk=flow.pk,
        flow_group=flow.flow_group,
        flow_name=flow.flow_name,
        owner=flow.owner,
        owning_group_id=flow.owning_group_id,
        paused=flow.paused,
    )
    for name in SPEC_FIELDS:
        if name in version.spec:
            setattr(old, name, version.spec[name])
    return old
