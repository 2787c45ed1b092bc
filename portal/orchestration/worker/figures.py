"""A job's status figures: what was delivered (rows published by the
datasets whose commit finished) and the watermarks checked in, not what was
extracted (`portal.pipeline.destinations.delivery` counts them)."""

from __future__ import annotations

import json
from typing import Any

from portal.pipeline.destinations.delivery import Delivery, delivery
from portal.pipeline.errors import ConfigError
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.watermarks import value_of


def summarise(
    spec: JobSpec, states: list[dict[str, Any]], committed: list[str] | None = None
) -> dict[str, Any]:
    """The JobExecution fields of the figures; `committed`: the datasets whose commit finished
    (None: all)."""
    lows: dict[str, str] = {}
    for state in sorted(states, key=lambda s: (s.get("work_unit") or {}).get("range_index", 0)):
        lows.setdefault(state["dataset_urn"], value_of(state.get("low_watermark")) or "")
    try:
        figures = delivery(spec, states, committed) if states else Delivery()
    except ConfigError:  # a bad job.commit.policy: the job fails on it; nothing was delivered
        figures = Delivery(read=sum(int(s.get("records_extracted") or 0) for s in states))
    return {
        "processed_count": figures.delivered,
        "records_read": figures.read,
        "records_rejected": figures.rejected,
        "low_watermark": _one(lows),
        "high_watermark": _one(figures.watermarks),
    }


def _one(values: dict[str, str]) -> str:
    """One dataset's value as is; several datasets' as a JSON object."""
    if not values:
        return ""
    return next(iter(values.values())) if len(values) == 1 else json.dumps(values, sort_keys=True)


def in_words(summary: dict[str, Any]) -> str:
    """``10 record(s) delivered (12 read, 2 rejected)``."""
    return (
        f"{summary['processed_count']:,} record(s) delivered ({summary['records_read']:,} read, "
        f"{summary['records_rejected']:,} rejected)"
    )
