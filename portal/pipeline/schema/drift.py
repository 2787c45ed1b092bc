"""Schema drift: how a dataset's source schema changed since the one recorded with its watermark.

Schemas travel as Spark's JSON form (``StructType.json()``: ``{"type": "struct", "fields": [{"name",
"type", "nullable", "metadata"}]}``), the form the TaskState's ``source_schema`` and the state store
keep; this module reads that JSON with the standard library only, so the web tier (the watermark
page's schema history) and the Spark side (:mod:`portal.pipeline.schema.evolution`) judge a change
with the same code and word it the same way.

Columns are compared by name; nullability is not a change (a database reports it loosely, and it
does not change what a reader can read). A changed type is a *widening* when every value of the old
type is a value of the new one: ``byte`` < ``short`` < ``integer`` < ``long``, ``float`` <
``double``, a decimal whose integer digits and scale both do not shrink, ``date`` -> ``timestamp``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from portal.pipeline.propertyrules import SCHEMA_EVOLUTION_POLICIES as POLICIES

POLICY_KEY = "schema.evolution.policy"
EVOLVE, FREEZE, DISCARD_COLUMNS = POLICIES

_INTEGRAL = {"byte": 1, "short": 2, "integer": 3, "long": 4}
_FLOATING = {"float": 1, "double": 2}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


def type_name(spark_type: Any) -> str:
    """A field's type as one short string: ``long``, ``decimal(10,2)``, or compact JSON when nested."""
    if isinstance(spark_type, str):
        return spark_type
    return json.dumps(spark_type, separators=(",", ":"), sort_keys=True)


def columns(schema_json: str | None) -> list[tuple[str, str]]:
    """``[(name, type), ...]`` of a schema JSON in column order (empty for none or unreadable)."""
    if not schema_json:
        return []
    try:
        data = json.loads(schema_json)
    except (TypeError, ValueError):
        return []
    fields = data.get("fields") if isinstance(data, dict) else None
    return [
        (str(f["name"]), type_name(f["type"])) for f in fields or [] if isinstance(f, dict) and "name" in f
    ]


def widens(old: str, new: str) -> bool:
    """Whether every value of type ``old`` is a value of type ``new`` (see the module docstring)."""
    if old == new:
        return True
    for ranks in (_INTEGRAL, _FLOATING):
        if old in ranks and new in ranks:
            return ranks[new] >= ranks[old]
    old_dec, new_dec = _DECIMAL.match(old), _DECIMAL.match(new)
    if old_dec and new_dec:
        (p1, s1), (p2, s2) = (map(int, old_dec.groups())), (map(int, new_dec.groups()))
        return s2 >= s1 and p2 - s2 >= p1 - s1
    if new_dec and old in _INTEGRAL:
        digits = {"byte": 3, "short": 5, "integer": 10, "long": 19}[old]
        precision, scale = map(int, new_dec.groups())
        return precision - scale >= digits
    return (old, new) in {
        ("date", "timestamp"),
        ("integer", "double"),
        ("short", "double"),
        ("byte", "double"),
    }


@dataclass
class Drift:
    """What changed from the recorded schema to the current one."""

    added: list[tuple[str, str]] = field(default_factory=list)
    removed: list[tuple[str, str]] = field(default_factory=list)
    changed: list[tuple[str, str, str]] = field(default_factory=list)  # name, old type, new type

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    @property
    def widened(self) -> list[tuple[str, str, str]]:
        return [c for c in self.changed if widens(c[1], c[2])]

    @property
    def incompatible(self) -> list[tuple[str, str, str]]:
        return [c for c in self.changed if not widens(c[1], c[2])]

    def describe(self) -> str:
        """``added email (string); removed fax (string); changed qty integer -> long (widened)``."""
        parts = []
        if self.added:
            parts.append("added " + ", ".join(f"{n} ({t})" for n, t in self.added))
        if self.removed:
            parts.append("removed " + ", ".join(f"{n} ({t})" for n, t in self.removed))
        for name, old, new in self.changed:
            parts.append(f"changed {name} {old} -> {new}" + (" (widened)" if widens(old, new) else ""))
        return "; ".join(parts) or "no change"


def diff(recorded_json: str | None, current_json: str | None) -> Drift:
    """The drift from ``recorded_json`` to ``current_json`` (none when either is missing)."""
    old, new = columns(recorded_json), columns(current_json)
    if not old or not new:
        return Drift()
    old_types, new_types = dict(old), dict(new)
    return Drift(
        added=[(n, t) for n, t in new if n not in old_types],
        removed=[(n, t) for n, t in old if n not in new_types],
        changed=[(n, old_types[n], t) for n, t in new if n in old_types and old_types[n] != t],
    )
