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

import difflib
import json
from dataclasses import dataclass
from typing import Any

from django.db.models import Max, QuerySet

from portal.crypto.encrypted import redact
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


def redacted_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A version's spec as pages and the API show it: secrets masked (crypto.encrypted.redact)."""
    return {**spec, "properties": redact(dict(spec.get("properties") or {}))}


# The fields as a diff names them (a person reads it, not the model).
LABELS = {
    "schedule_given": "schedule as written (Quartz)",
    "run_immediately": "run immediately",
    "template_uris": "templates",
    "owning_group": "owning group",
}


def _shown(spec: dict[str, Any], other: dict[str, Any], *, newer: bool) -> list[str]:
    """The spec as lines a person can read and diff, with secrets masked as
    everywhere (crypto.encrypted.redact). Two different ciphertexts mask the
    same, so on the newer side a changed secret is marked as changed, never shown."""
    spec = dict(spec)
    raw = dict(spec.get("properties") or {})
    other_raw = dict(other.get("properties") or {})
    shown = redact(raw)
    for key, value in shown.items():
        if newer and value != raw[key] and key in other_raw and other_raw[key] != raw[key]:
            shown[key] = f"{value} (changed)"
    spec["properties"] = shown
    lines: list[str] = []
    for name in sorted(spec):
        value = spec[name]
        if name == "properties":
            lines += [f"properties.{key} = {val}" for key, val in sorted(value.items())]
        else:
            lines.append(f"{LABELS.get(name, name)} = {json.dumps(value, ensure_ascii=False)}")
    return lines


@dataclass
class VersionDiff:
    old: FlowVersion
    new: FlowVersion
    lines: list[str]

    @property
    def identical(self) -> bool:
        return not self.lines


def diff(old: FlowVersion, new: FlowVersion) -> VersionDiff:
    """A unified diff of two versions' specs (either order)."""
    lines = list(
        difflib.unified_diff(
            _shown(old.spec, new.spec, newer=False),
            _shown(new.spec, old.spec, newer=True),
            fromfile=f"v{old.number}",
            tofile=f"v{new.number}",
            lineterm="",
        )
    )
    return VersionDiff(old=old, new=new, lines=lines)
