"""What the pages and the API ask of the control plane: run now, re-run, kill, resume.
Every request becomes an action row (or an execution plus its LAUNCH); the orchestrator does
the rest."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from portal.accounts.access import Principal
from portal.flows.models import FlowConfig
from portal.flows.policies import allow_concurrent_execution
from portal.orchestration.control import quota_gate
from portal.orchestration.control.actions import ActionKind, enqueue_for
from portal.orchestration.control.scheduler import create_execution
from portal.orchestration.models import (
    FINISHED_STATUSES,
    JOB_NOT_COMMITTED,
    RESUMABLE_STATUSES,
    Action,
    ExecutionStatus,
    FlowExecution,
    JobExecution,
    JobStatus,
)
from portal.orchestration.state.backfills import backfill_refusal


class NotAllowedNow(Exception):
    """The request does not fit the execution's state (a 409 for the API)."""


def _clean_backfill(backfill: Any) -> dict[str, dict[str, str | None]]:
    if backfill in (None, {}):
        return {}
    if not isinstance(backfill, dict):
        raise ValidationError({"backfill": "must be an object {datasetUrn: {low, high}}"})
    clean: dict[str, dict[str, str | None]] = {}
    for urn, bounds in backfill.items():
        if not isinstance(bounds, dict) or set(bounds) != {"low", "high"}:
            raise ValidationError({"backfill": f"{urn}: give exactly 'low' and 'high'"})
        high = str(bounds["high"] if bounds["high"] is not None else "").strip()
        # An empty low means "from the first record".
        low = str(bounds["low"]).strip() if bounds["low"] not in (None, "") else None
        if not urn.strip() or not high:
            raise ValidationError({"backfill": f"{urn}: dataset URN and high must be non-empty"})
        clean[urn.strip()] = {"low": low, "high": high}
    return clean


def run_now(flow: FlowConfig, *, user: Principal, backfill: Any = None) -> FlowExecution:
    """Start an execution now (a backfill when `backfill` gives per-dataset
    low/high watermarks; the stored watermarks are not moved by it). A
    backfill range that matches nothing the flow has loaded is refused."""
    bounds = _clean_backfill(backfill)
    for urn, span in bounds.items():
        if reason := backfill_refusal(flow, urn, span["low"], str(span["high"])):
            raise ValidationError({"backfill": reason})
    trigger = FlowExecution.Trigger.BACKFILL if bounds else FlowExecution.Trigger.RUN_NOW
    with transaction.atomic():
        quota_gate.check_hourly(flow.pk)  # QuotaExceeded: a 503 naming the quota
        execution = create_execution(
            flow, trigger, requested_by=getattr(user, "username", ""), backfill=bounds
        )
    assert execution is not None  # only ticks can collide
    return execution


RAN, CURRENT = "ran", "current"


def rerun_execution(execution: FlowExecution, *, user: Principal, version: str) -> FlowExecution:
    """Run an old execution's flow again, compiled from the flow version that
    execution ran (`version="ran"`) or from the flow as it is now
    (`"current"`). The new execution records which one it compiled."""
    if version not in (RAN, CURRENT):
        raise ValidationError({"version": f"Choose {RAN!r} (the version it ran) or {CURRENT!r}."})
    flow = execution.flow
    if flow is None:
        raise NotAllowedNow("The flow was deleted; its executions cannot run again.")
    pinned = None
    if version == RAN:
        if execution.flow_version is None:
            raise ValidationError(
                {
                    "version": "This execution recorded no flow version (it never compiled); run the current one."
                }
            )
        pinned = execution.flow_version
    with transaction.atomic():
        quota_gate.check_hourly(flow.pk)
        new = create_execution(
            flow,
            FlowExecution.Trigger.RUN_NOW,
            requested_by=getattr(user, "username", ""),
            pinned_version=pinned,
        )
    assert new is not None
    return new


def execution_in_the_way(flow: FlowConfig, *, besides: FlowExecution) -> FlowExecution | None:
    """The unfinished execution of `flow` because of which `besides` is skipped
    when it launches (the flow does not allow concurrent executions)."""
    if allow_concurrent_execution(flow):
        return None
    return (
        FlowExecution.objects.filter(
            flow=flow, status__in=[ExecutionStatus.COMPILED, ExecutionStatus.RUNNING]
        )
        .exclude(pk=besides.pk)
        .order_by("execution_id")
        .first()
    )


def skipped_because(running: FlowExecution) -> str:
    return (
        f"Execution {running.execution_id} of this flow is still {running.status.lower()} and "
        "flow.allowConcurrentExecution is false."
    )


def can_kill(execution: FlowExecution) -> bool:
    return execution.status not in FINISHED_STATUSES


def can_resume(execution: FlowExecution) -> bool:
    """Failed or cancelled, with some job for RESUME to run again (an
    execution that ended before its jobs were created has none)."""
    return execution.status in RESUMABLE_STATUSES and any(
        job.status in JOB_NOT_COMMITTED for job in execution.jobs.all()
    )


def kill(execution: FlowExecution, *, user: Principal) -> None:
    if not can_kill(execution):
        raise NotAllowedNow(f"Execution {execution.execution_id} is already {execution.status}.")
    enqueue_for(execution, ActionKind.KILL, payload={"by": getattr(user, "username", "")})


def resume(execution: FlowExecution, *, user: Principal) -> None:
    if execution.status not in RESUMABLE_STATUSES:
        raise NotAllowedNow(
            f"Only a failed or cancelled execution can be resumed; {execution.execution_id} is {execution.status}."
        )
    if not can_resume(execution):
        raise NotAllowedNow(
            f"Execution {execution.execution_id} has no failed, cancelled or skipped job to resume "
            "(it ended before its jobs were created); run the flow again instead."
        )
    enqueue_for(execution, ActionKind.RESUME, payload={"by": getattr(user, "username", "")})


RERUNNABLE_JOB_STATUSES = {JobStatus.FAILED, JobStatus.CANCELLED}


def can_rerun_job(execution: FlowExecution, job: JobExecution) -> bool:
    return execution.status in RESUMABLE_STATUSES and job.status in RERUNNABLE_JOB_STATUSES


def rerun_job(execution: FlowExecution, job_name: str, *, user: Principal) -> None:
    """Run one failed (or cancelled) job of a finished execution again, with
    the jobs it kept from running; its committed parents are not re-run."""
    job = execution.jobs.filter(job_name=job_name).first()
    if job is None:
        raise NotAllowedNow(f"Execution {execution.execution_id} has no job {job_name}.")
    if not can_rerun_job(execution, job):
        raise NotAllowedNow(
            f"Only a failed or cancelled job of a failed or cancelled execution can be re-run; "
            f"{job_name} is {job.status} in an execution that is {execution.status}."
        )
    enqueue_for(execution, ActionKind.RESUME, payload={"by": getattr(user, "username", ""), "job": job_name})


def relaunch_waiting() -> int:
    """After a topology change: executions still waiting for a path try
    again. One read and one INSERT, inside the change's transaction."""
    waiting = FlowExecution.objects.filter(status=ExecutionStatus.PENDING, flow__isnull=False).values_list(
        "flow_group", "flow_name", "execution_id"
    )
    now = timezone.now()
    actions = [
        Action(kind=ActionKind.LAUNCH, flow_group=g, flow_name=n, execution_id=e, due_at=now, payload={})
        for g, n, e in waiting
    ]
    # The same request already waiting is not repeated (the actions' unique constraint).
    Action.objects.bulk_create(actions, ignore_conflicts=True)
    return len(actions)
