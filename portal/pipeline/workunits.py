"""WorkUnits and MultiWorkUnits (Gobblin's load-balancing unit).

A :class:`WorkUnit` is one watermark range of one dataset: ``low_watermark`` (exclusive, the
previous run's actual high) to ``expected_high_watermark`` (inclusive).  A large dataset is split
into several consecutive ranges (``range_index``/``range_count``) so a failure loses at most one
range.  ``payload`` is source-specific (file list, query bounds) and stays JSON-able.

:func:`pack` groups work units into at most N :class:`MultiWorkUnit` s balanced by estimated size
(longest-processing-time-first).  One MultiWorkUnit is run by one worker thread, its work units one
after the other in watermark order; N is ``mr.job.max.mappers`` (Gobblin's name), default the Spark
default parallelism.  Ranges of one dataset that land in the same group run in order and a failed
range cancels the later ranges of that dataset in the group (they could not be committed anyway).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any


@dataclass
class WorkUnit:
    """One watermark range of one dataset."""

    dataset_urn: str
    low_watermark: str | None
    expected_high_watermark: str | None
    range_index: int = 0
    range_count: int = 1
    estimated_bytes: int = 0
    empty: bool = False
    error: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    task_id: str = ""

    def describe(self) -> dict[str, Any]:
        return {
            "range_index": self.range_index,
            "range_count": self.range_count,
            "estimated_bytes": self.estimated_bytes,
            "empty": self.empty,
        }


@dataclass
class MultiWorkUnit:
    """Work units run one after the other by a single task thread."""

    id: str
    work_units: list[WorkUnit] = field(default_factory=list)

    @property
    def estimated_bytes(self) -> int:
        return sum(wu.estimated_bytes for wu in self.work_units)


def pack(work_units: list[WorkUnit], max_groups: int, prefix: str = "mwu") -> list[MultiWorkUnit]:
    """Pack into at most ``max_groups`` groups, largest first onto the currently lightest group."""
    max_groups = max(1, min(max_groups, len(work_units) or 1))
    groups = [MultiWorkUnit(f"{prefix}_{i}") for i in range(max_groups)]
    heap: list[tuple[int, int]] = [(0, i) for i in range(max_groups)]
    # Weight 1 byte minimum so empty/unknown-size units still spread out.
    for wu in sorted(work_units, key=lambda w: (-max(w.estimated_bytes, 1), w.dataset_urn, w.range_index)):
        load, index = heapq.heappop(heap)
        groups[index].work_units.append(wu)
        heapq.heappush(heap, (load + max(wu.estimated_bytes, 1), index))
    for group in groups:
        group.work_units.sort(key=lambda w: (w.dataset_urn, w.range_index))
    return [g for g in groups if g.work_units]
