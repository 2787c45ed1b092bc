"""Playing the worker's part in-process: claim a dispatched job, report, process actions."""

from __future__ import annotations

from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import (
    JobExecution,
    JobStatus,
)
from portal.orchestration.worker import executor


def jobs(execution) -> list[JobExecution]:
    return list(execution.jobs.order_by("hop_index"))


def play_worker(job: JobExecution, status: str = JobStatus.COMMITTED, **fields) -> None:
    """What a worker does with a dispatched job: claim it, then report."""
    claimed = executor.claim(job.pk, job.attempt, "test-worker")
    assert claimed is not None
    executor.report(claimed, job.attempt, status, **fields)
    process_actions()
