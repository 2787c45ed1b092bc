"""The tries of a job (Airflow's task tries): one JobState row per attempt, kept when a retry, a
redelivery or a resume starts the next one, so a run that failed and then committed still shows
the failed try, with its worker, times and reason.

The worker opens and closes the row of a try it runs (statestore.start_job_state /
finish_job_state); the orchestrator closes a try no worker finished (it never started, or its
worker died) and opens the next with why it began. A job keeps its last TRIES_KEPT tries: resumes
are unbounded, its history is not."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Sum
from django.utils import timezone

from portal.orchestration.models import (
    JOB_FINISHED,
    FlowExecution,
    JobExecution,
    JobState,
    JobStatus,
    TryCause,
)

# Retries and redeliveries are bounded by the flow's job.retry.count and JOB_MAX_REDELIVERIES;
# resumes are not, so the oldest tries beyond this many go.
TRIES_KEPT = 25


def close(job: JobExecution, attempt: int) -> None:
    """End try `attempt` as the job stands now, if no worker ended it: a try cancelled, skipped or
    failed before a worker claimed it has a row too."""
    now = timezone.now()
    status = job.status if job.status in JOB_FINISHED else JobStatus.FAILED
    ended = job.ended_at or now
    state = JobState.objects.filter(job=job, attempt=attempt).first()
    if state is None:
        JobState.objects.create(
            job=job,
            attempt=attempt,
            worker=job.worker,
            status=status,
            message=job.message[:4000],
            started_at=job.started_at or job.dispatched_at or ended,
            ended_at=ended,
        )
    elif state.ended_at is None:
        state.status, state.ended_at = status, ended
        state.message = state.message or job.message[:4000]
        state.save(update_fields=["status", "ended_at", "message"])


def open_next(job: JobExecution, attempt: int, cause: str) -> None:
    """Record that try `attempt` was queued and why (its worker fills in when it ran); forget the
    tries older than the last TRIES_KEPT."""
    JobState.objects.update_or_create(
        job=job,
        attempt=attempt,
        defaults={"status": JobStatus.PENDING, "cause": cause, "started_at": timezone.now(), "worker": ""},
    )
    JobState.objects.filter(job=job, attempt__lte=attempt - TRIES_KEPT).delete()


@dataclass(frozen=True)
class Try:
    """One try as pages and the API show it."""

    attempt: int
    cause: str  # TryCause's label: why it began
    status: str
    worker: str
    started_at: datetime | None  # None: queued, not started yet
    ended_at: datetime | None
    message: str
    current: bool


def tries_of(job: JobExecution) -> list[Try]:
    """Every kept try of `job`, first first; the current one from the job row when no worker has
    reported it yet. Reads `job.run_states` (prefetch it for many jobs)."""
    found: list[Try] = []
    for state in sorted(job.run_states.all(), key=lambda s: s.attempt):
        queued = state.status == JobStatus.PENDING
        current = state.attempt == job.attempt
        found.append(
            Try(
                attempt=state.attempt,
                cause=TryCause(state.cause or TryCause.FIRST).label,
                status=job.status if current and queued else state.status,
                worker=state.worker,
                started_at=None if queued else state.started_at,
                ended_at=state.ended_at,
                message=state.message or (job.message if current else ""),
                current=current,
            )
        )
    if job.attempt and not any(t.attempt == job.attempt for t in found):
        found.append(
            Try(
                attempt=job.attempt,
                cause=TryCause.FIRST.label if job.attempt == 1 else "",
                status=job.status,
                worker=job.worker,
                started_at=job.started_at,
                ended_at=job.ended_at,
                message=job.message,
                current=True,
            )
        )
    return found


def count_earlier(executions: Iterable[FlowExecution]) -> list[FlowExecution]:
    """`executions`, each with `earlier_tries` set: how many tries its jobs made before their
    current ones (one query for them all). A list of runs says with it that a COMMITTED run
    committed only after a failed try, as Airflow's grid shows a task's try number; the tries
    themselves are on the execution page. Counted from the jobs' attempt numbers, so tries
    beyond TRIES_KEPT that were forgotten still count."""
    found = list(executions)
    counts = dict(
        JobExecution.objects.filter(execution__in=[e.pk for e in found], attempt__gt=1)
        .values("execution")
        .annotate(earlier=Sum(F("attempt") - 1))
        .values_list("execution", "earlier")
    )
    for execution in found:
        execution.earlier_tries = int(counts.get(execution.pk) or 0)  # type: ignore[attr-defined]
    return found
