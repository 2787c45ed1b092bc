"""What a job delivered, as opposed to what it read: the figures a status must report.

A run can read 341,776 rows and publish 333,490 (rows rejected to the err folder), or read 170,888
and publish none (a FAIL policy under ``job.commit.policy=full``). A status that sums
``records_extracted`` and shows the last range's high watermark says neither. Here, from the
TaskStates and the commit policy (:func:`~portal.pipeline.destinations.commitplan.apply_commit_policy`):

* ``read``: rows extracted, every task;
* ``rejected``: rows failed by row policies (pre-fork and in every branch, err-file rows included);
* ``delivered``: rows written by the published branches of the committed tasks of the datasets whose
  commit finished — per branch of a fork, summed (each branch delivers its own copy);
* ``watermark``: per dataset, the watermark the commit checked in (the previous one when nothing
  of the dataset was committed).

:func:`failure_summary` words a job's failed tasks as one message: FAIL row policies' counts summed
over every failed range, not only the first one's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from portal.pipeline import watermarks
from portal.pipeline.destinations.commitplan import apply_commit_policy
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.taskstate import SUCCEEDED


@dataclass
class Delivery:
    read: int = 0
    rejected: int = 0
    delivered: int = 0
    watermarks: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "rejected": self.rejected,
            "delivered": self.delivered,
            "watermarks": dict(self.watermarks),
        }


def delivery(
    jobspec: dict[str, Any] | JobSpec,
    states: list[dict[str, Any]],
    committed_datasets: Iterable[str] | None = None,
) -> Delivery:
    """The job's figures; ``committed_datasets`` are the datasets whose commit finished (None: all)."""
    result = Delivery()
    done = None if committed_datasets is None else set(committed_datasets)
    by_urn: dict[str, list[dict[str, Any]]] = {}
    for task in apply_commit_policy(jobspec, states):
        by_urn.setdefault(task["dataset_urn"], []).append(task)
        result.read += int(task.get("records_extracted") or 0)
        result.rejected += int(task.get("records_rejected") or 0)
        result.rejected += sum(int(b.get("records_rejected") or 0) for b in task.get("branches") or [])
    for urn, tasks in sorted(by_urn.items()):
        tasks.sort(key=lambda t: (t.get("work_unit") or {}).get("range_index", 0))
        finished = done is None or urn in done
        committed = [t for t in tasks if t.get("committed")] if finished else []
        for task in committed:
            result.delivered += sum(
                int(b.get("records_written") or 0) for b in task["branches"] if b["status"] == SUCCEEDED
            )
        value = watermarks.merge([t["actual_high_watermark"] for t in committed]) if committed else None
        result.watermarks[urn] = watermarks.value_of(value or tasks[0].get("low_watermark")) or ""
    return result


def failure_summary(failed: list[dict[str, Any]], total: int) -> str:
    """``2 of 5 task(s) failed: row policy NotNullPolicy (FAIL) failed on 4,159 record(s) in 2
    task(s)`` — or the first failed task's error when no FAIL row policy counted anything."""
    counts: dict[str, list[int]] = {}
    for task in failed:
        for report in task.get("quality") or []:
            if report.get("type") == "FAIL" and report.get("failed_records"):
                counts.setdefault(report["policy"], []).append(int(report["failed_records"]))
    head = f"{len(failed)} of {total} task(s) failed: "
    if not counts:
        return head + str(failed[0].get("error") or failed[0]["status"])
    return head + "; ".join(
        f"row policy {policy} (FAIL) failed on {sum(n):,} record(s) in {len(n)} task(s)"
        for policy, n in sorted(counts.items())
    )
