"""Watermark strings.

A watermark is stored by the state store as one string per ``dataset.urn``.  Most sources use a
plain value (a number, an ISO timestamp, or for files ``<mtime ms, 15 digits>:<relative path>``, which
orders by modification time and then by name so files sharing a timestamp are neither skipped nor
read twice).

A source reading with a look-back window (``extract.lookback``) must also remember which rows near
the watermark it already delivered, so re-reading the window does not deliver them again.  Its
watermark is then a JSON object ``{"value": "<plain value>", "seen": [<xxhash64 of key + watermark
column>, ...]}``.  :func:`value_of` gives the plain value for display either way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable


def make(value: str | None, seen: Iterable[int] | None = None) -> str | None:
    """Build a watermark string; with ``seen`` hashes it is the JSON form."""
    if value is None:
        return None
    if seen is None:
        return value
    return json.dumps({"value": value, "seen": sorted(set(int(h) for h in seen))}, separators=(",", ":"))


def _parse(watermark: str | None) -> tuple[str | None, list[int] | None]:
    if watermark is None or watermark == "":
        return None, None
    if watermark.startswith("{"):
        try:
            data = json.loads(watermark)
        except json.JSONDecodeError:
            return watermark, None
        if isinstance(data, dict) and "value" in data:
            return (None if data["value"] is None else str(data["value"])), [
                int(h) for h in data.get("seen", [])
            ]
    return watermark, None


def value_of(watermark: str | None) -> str | None:
    """The plain value of a watermark (what a status page shows)."""
    return _parse(watermark)[0]


def seen_of(watermark: str | None) -> list[int]:
    """The delivered-row hashes of a look-back watermark (empty for plain ones)."""
    return _parse(watermark)[1] or []


def merge(watermarks: list[str | None]) -> str | None:
    """The dataset watermark after committing consecutive ranges in order.

    The value is the last range's; the seen sets are united (a superset of the window is harmless,
    hashes include the watermark column so an updated row never matches an old hash).
    """
    present = [w for w in watermarks if w is not None]
    if not present:
        return None
    last_value, _ = _parse(present[-1])
    seens = [_parse(w)[1] for w in present]
    if all(s is None for s in seens):
        return last_value
    union: set[int] = set()
    for s in seens:
        union.update(s or [])
    return make(last_value, union)
