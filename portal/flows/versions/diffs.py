"""Two versions of a flow side by side, as a person reads them: a unified diff of their specs
and a spec to show, secrets masked as everywhere (crypto.encrypted.redact)."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from portal.crypto.encrypted import redact
from portal.flows.models import FlowVersion


def redacted_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A version's spec as pages and the API show it: secrets masked (crypto.encrypted.redact)."""
    return {**spec, "properties": redact(dict(spec.get("properties") or {}))}


# The fields as a diff names them (a person reads it, not the model).
LABELS = {
    "schedule_given": "schedule as written",
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
