"""The orchestrator: the handlers of the action rows.

LAUNCH compiles the flow and creates the execution's JobExecutions;
REEVALUATE walks the DAG — a job is dispatched (through the outbox) when all
its parents committed, skipped when one of them failed, retried after its
backoff when it failed with retries left — and rolls the jobs' statuses up
into the execution's. KILL, RESUME and the two deadline actions change jobs
and then re-evaluate. Every handler runs inside the transaction that marks
its action done, with the execution row locked, so handlers never race.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.events import outcomes
from portal.events.services import raise_event
from portal.flows.compiler import COMPILED, PENDING, compile_flow
from portal.flows.compiler.record import current_plan
from portal.flows.models import FlowConfig, FlowVersion
from portal.flows.policies import (
    flow_sla_seconds,
    job_start_sla_seconds,
    retry_backoff_seconds,
    retry_count,
)
from portal.flows.versions import services as versions
from portal.orchestration.control import outbox, quota_gate, triggers
from portal.orchestration.control.actions import enqueue_for, handles
from portal.orchestration.control.commands import execution_in_the_way, skipped_because
from portal.orchestration.control.jobspecs import build_jobspec
from portal.orchestration.models import (
    FINISHED_STATUSES,
    JOB_FINISHED,
    JOB_NOT_COMMITTED,
    JOB_STATUS_RANK,
    RESUMABLE_STATUSES,
    Action,
    ActionKind,
    ExecutionStatus,
    FlowExecution,
    JobExecution,
    JobState,
    JobStatus,
    TryCause,
    delivered,
    delivered_text,
)
from portal.orchestration.signals import job_run_changed
from portal.orchestration.state import tries
from portal.orchestration.state.glance import note_run
from portal.quotas.services import QuotaExceeded

logger = logging.getLogger(__name__)

RUN_JOB_TASK = "flowport.run_job"


def _locked_execution(action: Action) -> FlowExecution | None:
    # Every row: a LAUNCH finds a tick written ahead of its time (see launch).
    return (
        FlowExecution.with_upcoming.select_for_update()
        .filter(flow_group=action.flow_group, flow_name=action.flow_name, execution_id=action.execution_id)
        .first()
    )


def _finish(execution: FlowExecution, status: str, message: str) -> None:
    execution.status, execution.message = status, message[:4000]
    execution.ended_at = timezone.now()
    execution.save(update_fields=["status", "message", "ended_at"])
    note_run(execution)
    logger.info("execution %s %s: %s", execution, status, message)
    if status in (ExecutionStatus.COMMITTED, ExecutionStatus.FAILED):
        outcomes.execution_ended(
            flow_group=execution.flow_group,
            flow_name=execution.flow_name,
            execution_id=execution.execution_id,
            committed=status == ExecutionStatus.COMMITTED,
            title=str(execution),
            message=execution.message,
            ended_at=execution.ended_at,
            previous_if_unknown=lambda: _previous_outcome(execution),
        )
    if status == ExecutionStatus.COMMITTED:
        _tell_downstream(execution)


def _tell_downstream(execution: FlowExecution) -> None:
    """Start the flows waiting for this commit, in this transaction (orchestration.control.triggers); a
    fault there is logged and must not undo the commit it follows."""
    try:
        with transaction.atomic():
            triggers.execution_committed(execution)
    except Exception:
        logger.exception("the data triggers of %s failed", execution)


def _previous_outcome(execution: FlowExecution) -> bool | None:
    """Was the flow's last finished execution before this one good? Asked only
    for a flow whose outcome was not recorded yet (one that last ended before
    outcomes were kept)."""
    previous = (
        FlowExecution.objects.filter(
            flow_group=execution.flow_group,
            flow_name=execution.flow_name,
            status__in=[ExecutionStatus.COMMITTED, ExecutionStatus.FAILED],
        )
        .exclude(pk=execution.pk)
        .order_by("-execution_id")
        .values_list("status", flat=True)
        .first()
    )
    return None if previous is None else previous == ExecutionStatus.COMMITTED


def _set_job(
    job: JobExecution, status: str, message: str | None = None, *, cause: str = "", **fields: object
) -> None:
    """Move `job` to `status`; a new `attempt` among `fields` begins a try (`cause`: a TryCause),
    after the last one is closed as it stood (orchestration.state.tries)."""
    ended_a_run = job.status == JobStatus.RUNNING and status != JobStatus.RUNNING
    attempt = job.attempt
    if "attempt" in fields and attempt:
        tries.close(job, attempt)
    job.status, job.status_rank = status, JOB_STATUS_RANK[status]
    if message is not None:
        job.message = message[:4000]
    if status in JOB_FINISHED and job.ended_at is None:
        job.ended_at = timezone.now()
    if status != JobStatus.PENDING:
        job.waiting_since = None  # no longer held back by a quota
    if "attempt" in fields:  # a new attempt: the last one's log tails are not its own
        fields = {"log_excerpt": "", "driver_log_excerpt": "", **fields}
    for name, value in fields.items():
        setattr(job, name, value)
    job.save()
    if "attempt" in fields and attempt:
        tries.open_next(job, job.attempt, cause)
    if ended_a_run:  # its worker died or it was cut off: the attempt's run ends here (lineage)
        ended = status if status in (JobStatus.CANCELLED, JobStatus.COMMITTED) else JobStatus.FAILED
        job_run_changed.send(sender=JobExecution, job=job, status=ended, attempt=attempt)


# --- LAUNCH ----------------------------------------------------------------------


class TickNotDue(RuntimeError):
    """A LAUNCH claimed before its execution's tick (clocks disagreeing)."""


def _skip_tick_of_a_flow_that_cannot_run(flow: FlowConfig, execution: FlowExecution, reason: str) -> None:
    """A flow that stopped compiling after its save (a topology change) is not run on its ticks:
    each tick is recorded SKIPPED with the reason, and one event (per flow and reason, not per
    tick) says the flow cannot run until it is fixed."""
    _finish(execution, ExecutionStatus.SKIPPED, f"Not run: the flow cannot run: {reason}")
    digest = hashlib.sha256(reason.encode()).hexdigest()[:16]
    raise_event(
        "flow.cannot_run",
        f"{flow} cannot run; its scheduled ticks are skipped until it is fixed: {reason}",
        dedupe_key=f"flow.cannot_run:{flow.pk}:{digest}",
        flow_group=flow.flow_group,
        flow_name=flow.flow_name,
        execution_id=execution.execution_id,
    )


# How often a first tick waiting for the run made on save looks again.
FIRST_TICK_RECHECK_SECONDS = 10


def _first_tick_behind_the_run_on_save(execution: FlowExecution, running: FlowExecution) -> bool:
    """A flow saved with "run immediately" starts a run at once; its schedule's first tick
    often comes while that run is still warming up (Spark starting). That tick was no missed
    run: it waits for the run on save, then runs. Later ticks are skipped as ever (one at a
    time, flow.allowConcurrentExecution)."""
    return (
        execution.trigger == FlowExecution.Trigger.SCHEDULE
        and running.trigger == FlowExecution.Trigger.RUN_IMMEDIATELY
        and not FlowExecution.objects.filter(
            flow_id=execution.flow_id, trigger=FlowExecution.Trigger.SCHEDULE
        )
        .exclude(pk=execution.pk)
        .exists()
    )


def _wait_for(execution: FlowExecution, running: FlowExecution) -> None:
    message = (
        f"Waiting for execution {running.execution_id} (the run made when the flow was saved) to finish; "
        "this first scheduled run starts after it."
    )
    if execution.message != message:
        execution.message = message
        execution.save(update_fields=["message"])
    enqueue_for(
        execution,
        ActionKind.LAUNCH,
        due_at=timezone.now() + timedelta(seconds=FIRST_TICK_RECHECK_SECONDS),
    )


@handles(ActionKind.LAUNCH)
def launch(action: Action) -> None:  # noqa: C901
    execution = _locked_execution(action)
    if execution is None or execution.status != ExecutionStatus.PENDING:
        return  # already launched (a retaken action) or gone
    if execution.scheduled_at is not None and execution.scheduled_at > timezone.now():
        # A tick written ahead launches at its time: its LAUNCH is due then, so this
        # is a clock step between processes; the action is retried shortly.
        raise TickNotDue(f"{execution} is due at {execution.scheduled_at:%H:%M:%S}")
    if execution.flow_id is None:
        _finish(execution, ExecutionStatus.SKIPPED, "The flow was deleted before this execution started.")
        return
    # One launch per flow at a time, so the concurrency check cannot race.
    flow = FlowConfig.objects.select_for_update().select_related("owner").get(pk=execution.flow_id)
    if running := execution_in_the_way(flow, besides=execution):
        if _first_tick_behind_the_run_on_save(execution, running):
            _wait_for(execution, running)
            return
        _finish(execution, ExecutionStatus.SKIPPED, skipped_because(running))
        return
    if execution.trigger in (FlowExecution.Trigger.SCHEDULE, FlowExecution.Trigger.RUN_IMMEDIATELY):
        try:  # run-now and backfills were refused when asked for
            quota_gate.check_hourly(flow.pk, besides=execution.pk)
        except QuotaExceeded as refused:
            _finish(execution, ExecutionStatus.SKIPPED, f"Not run: {refused.message}")
            return

    # A re-run asked for the version an old execution ran; otherwise the flow as it is now.
    pinned: FlowVersion | None = None
    if execution.pinned_version is not None:
        pinned = versions.versions_of(flow).filter(number=execution.pinned_version).first()
        if pinned is None:
            _finish(execution, ExecutionStatus.FAILED, f"The flow has no version {execution.pinned_version}.")
            return
    # The plan the flow's save stored, while nothing it depends on has moved; else compiled now.
    compiled = (None if pinned else current_plan(flow)) or compile_flow(
        versions.as_flow(flow, pinned) if pinned else flow
    )
    if compiled.status == PENDING:
        # Waits for a topology change (see receivers), recorded, not dropped.
        execution.message = "Waiting for the topology: " + "; ".join(compiled.pending_reasons)
        execution.save(update_fields=["message"])
        return
    if compiled.status != COMPILED and execution.trigger == FlowExecution.Trigger.SCHEDULE:
        _skip_tick_of_a_flow_that_cannot_run(flow, execution, compiled.message)
        return
    if compiled.status != COMPILED:
        _finish(execution, ExecutionStatus.FAILED, f"Compilation failed: {compiled.message}")
        return
    dag = compiled.to_dict()
    plans = {job["jobName"]: job for job in dag["jobs"]}
    retries = retry_count(flow.properties)
    JobExecution.objects.bulk_create(
        [
            JobExecution(
                execution=execution,
                job_name=name,
                job_group=execution.flow_group,
                hop_index=plan["hopIndex"],
                executor=plan["executor"],
                queue=plan["queue"],
                spark_master=plan["sparkMaster"],
                parents=plan["parents"],
                spec=build_jobspec(execution, plan, plans),
                max_retries=retry_count(plan["properties"], default=retries),
                attempt=1,
            )
            for name, plan in plans.items()
        ]
    )
    execution.dag = dag
    execution.status = ExecutionStatus.COMPILED
    execution.message = compiled.message
    execution.flow_version = pinned.number if pinned else versions.latest_number(flow)
    execution.pack_versions = dict(compiled.pinned_versions)
    execution.topology_revision = compiled.topology_revision
    execution.plan_hash = compiled.plan_hash()
    execution.save(
        update_fields=[
            "dag",
            "status",
            "message",
            "flow_version",
            "pack_versions",
            "topology_revision",
            "plan_hash",
        ]
    )
    note_run(execution)
    enqueue_for(
        execution,
        ActionKind.ENFORCE_FLOW_FINISH_DEADLINE,
        due_at=timezone.now() + timedelta(seconds=flow_sla_seconds(flow.properties)),
    )
    reevaluate_execution(execution)


# --- REEVALUATE ------------------------------------------------------------------


@handles(ActionKind.REEVALUATE)
def reevaluate(action: Action) -> None:
    execution = _locked_execution(action)
    if execution is not None and execution.status not in FINISHED_STATUSES:
        reevaluate_execution(execution)


def _send(job: JobExecution) -> None:
    outbox.add_message(
        job.queue, RUN_JOB_TASK, {"job_id": job.pk, "attempt": job.attempt, "jobspec": job.spec}
    )


def _resend_after() -> datetime:
    return timezone.now() + timedelta(seconds=settings.WORKER_LEASE_SECONDS)


def _dispatch(execution: FlowExecution, job: JobExecution) -> None:
    now = timezone.now()
    # Until a worker claims it, lease_until is when the message is sent again.
    _set_job(
        job,
        JobStatus.ORCHESTRATED,
        "",
        dispatched_at=now,
        worker="",
        lease_until=_resend_after(),
        not_before=None,
    )
    _send(job)
    enqueue_for(
        execution,
        ActionKind.ENFORCE_JOB_START_DEADLINE,
        job_name=job.job_name,
        due_at=now + timedelta(seconds=job_start_sla_seconds(job.spec.get("properties", {}))),
        payload={"attempt": job.attempt},
    )


def _retry_or_keep(execution: FlowExecution, job: JobExecution) -> bool:
    """A failed job with retries left goes back to PENDING as a new attempt."""
    if job.status != JobStatus.FAILED or execution.cancel_requested or job.retries >= job.max_retries:
        return False
    if job.redeliveries > settings.JOB_MAX_REDELIVERIES:
        return False  # a poison job: a retry would kill more workers
    delay = retry_backoff_seconds(job.spec.get("properties", {}), job.retries)
    not_before = timezone.now() + timedelta(seconds=delay)
    _set_job(
        job,
        JobStatus.PENDING,
        f"Retry {job.retries + 1} of {job.max_retries} in {delay:g}s after: {job.message}",
        cause=TryCause.RETRY,
        attempt=job.attempt + 1,
        retries=job.retries + 1,
        not_before=not_before,
        ended_at=None,
    )
    enqueue_for(execution, ActionKind.REEVALUATE, due_at=not_before)
    return True


def reevaluate_execution(execution: FlowExecution) -> None:
    """Dispatch, skip and retry jobs, then roll their statuses up."""
    jobs = list(
        JobExecution.objects.select_for_update().filter(execution=execution).order_by("hop_index", "pk")
    )
    by_name = {job.job_name: job for job in jobs}
    now = timezone.now()
    gate = quota_gate.Gate(execution)
    for job in jobs:  # hop order: parents are settled before their children
        _retry_or_keep(execution, job)
        if job.status != JobStatus.PENDING:
            continue
        parents = [by_name[p] for p in job.parents if p in by_name]
        failed = next((p for p in parents if p.status in JOB_NOT_COMMITTED), None)
        if execution.cancel_requested:
            _set_job(job, JobStatus.CANCELLED, "Cancelled before it started.")
        elif failed:
            _set_job(
                job, JobStatus.SKIPPED, f"Skipped: parent job {failed.job_name} {failed.status.lower()}."
            )
        elif all(p.status == JobStatus.COMMITTED for p in parents):
            if job.not_before and job.not_before > now:
                continue  # its REEVALUATE is queued for then
            if (waiting := gate.hold(job)) is not None:
                gate.wait(job, waiting)
                continue
            _dispatch(execution, job)
    _roll_up(execution, jobs)
    gate.wake(jobs)


def _roll_up(execution: FlowExecution, jobs: list[JobExecution]) -> None:
    statuses = {job.status for job in jobs}
    if jobs and statuses <= JOB_FINISHED:
        if statuses == {JobStatus.COMMITTED}:
            _finish(
                execution,
                ExecutionStatus.COMMITTED,
                f"{len(jobs)} job(s) committed; delivered {delivered_text(delivered(jobs))}.",
            )
        elif execution.cancel_requested:
            _finish(execution, ExecutionStatus.CANCELLED, execution.message or "Cancelled.")
        else:
            first = next(j for j in jobs if j.status in (JobStatus.FAILED, JobStatus.CANCELLED))
            _finish(
                execution,
                ExecutionStatus.FAILED,
                f"Job {first.job_name} {first.status.lower()}: {first.message}",
            )
        return
    if statuses & {JobStatus.RUNNING, JobStatus.COMMITTED, JobStatus.FAILED} and (
        execution.status != ExecutionStatus.RUNNING
    ):
        execution.status = ExecutionStatus.RUNNING
        execution.started_at = execution.started_at or timezone.now()
        execution.save(update_fields=["status", "started_at"])
        note_run(execution)


# --- KILL / RESUME -----------------------------------------------------------------


def cancel_execution(execution: FlowExecution, message: str) -> None:
    execution.cancel_requested = True
    execution.message = message
    execution.save(update_fields=["cancel_requested", "message"])
    for job in JobExecution.objects.select_for_update().filter(execution=execution):
        if job.status in (JobStatus.PENDING, JobStatus.ORCHESTRATED):
            _set_job(job, JobStatus.CANCELLED, message)
        elif job.status == JobStatus.RUNNING:
            # The worker sees this on its next heartbeat and cancels the Spark job group.
            job.cancel_requested = True
            job.save(update_fields=["cancel_requested"])
    if execution.status == ExecutionStatus.PENDING:
        _finish(execution, ExecutionStatus.CANCELLED, message)
    else:
        reevaluate_execution(execution)


@handles(ActionKind.KILL)
def kill(action: Action) -> None:
    execution = _locked_execution(action)
    if execution is None or execution.status in FINISHED_STATUSES:
        return
    who = action.payload.get("by") or "a user"
    cancel_execution(execution, f"Killed by {who}.")


@handles(ActionKind.RESUME)
def resume(action: Action) -> None:
    execution = _locked_execution(action)
    if execution is None or execution.status not in RESUMABLE_STATUSES:
        return
    resumed = 0
    jobs = list(JobExecution.objects.select_for_update().filter(execution=execution))
    # A re-run of one job (Airflow's "clear task"): that job and the jobs
    # below it that it kept from running; committed parents stay committed,
    # other failed branches stay failed.
    only = _job_and_descendants(jobs, action.payload["job"]) if action.payload.get("job") else None
    for job in jobs:
        if only is not None and job.job_name not in only:
            continue
        if job.status in JOB_NOT_COMMITTED:
            _set_job(
                job,
                JobStatus.PENDING,
                "Resumed.",
                cause=TryCause.RESUME,
                attempt=job.attempt + 1,
                retries=0,
                redeliveries=0,
                cancel_requested=False,
                not_before=None,
                ended_at=None,
            )
            resumed += 1
    if not resumed:
        return
    execution.status = ExecutionStatus.RUNNING
    execution.cancel_requested = False
    execution.ended_at = None
    who = action.payload.get("by") or "a user"
    execution.message = (
        f"Re-ran {action.payload['job']} ({resumed} job(s)) by {who}."
        if only is not None
        else f"Resumed {resumed} job(s) by {who}."
    )
    execution.save(update_fields=["status", "cancel_requested", "ended_at", "message"])
    note_run(execution)
    reevaluate_execution(execution)


def _job_and_descendants(jobs: list[JobExecution], name: str) -> set[str]:
    children: dict[str, list[str]] = {}
    for job in jobs:
        for parent in job.parents:
            children.setdefault(parent, []).append(job.job_name)
    found, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo.extend(children.get(current, []))
    return found


# --- deadlines ----------------------------------------------------------------------


@handles(ActionKind.ENFORCE_JOB_START_DEADLINE)
def enforce_job_start_deadline(action: Action) -> None:
    execution = _locked_execution(action)
    if execution is None:
        return
    job = (
        JobExecution.objects.select_for_update().filter(execution=execution, job_name=action.job_name).first()
    )
    if job is None or job.status != JobStatus.ORCHESTRATED or job.attempt != action.payload.get("attempt"):
        return  # it started (or was redispatched) in time
    waited = (timezone.now() - job.dispatched_at).total_seconds() if job.dispatched_at else 0
    message = (
        f"Did not start within its start deadline ({waited:.0f}s on queue {job.queue}; no worker took it)."
    )
    _set_job(job, JobStatus.FAILED, message)
    raise_event(
        "sla.job_start_missed",
        f"{job.job_name}: {message}",
        flow_group=execution.flow_group,
        flow_name=execution.flow_name,
        execution_id=execution.execution_id,
        job_name=job.job_name,
    )
    reevaluate_execution(execution)


@handles(ActionKind.ENFORCE_FLOW_FINISH_DEADLINE)
def enforce_flow_finish_deadline(action: Action) -> None:
    execution = _locked_execution(action)
    if execution is None or execution.status in FINISHED_STATUSES:
        return
    message = "Killed: did not finish within its SLA (gobblin.flow.sla.time)."
    raise_event(
        "sla.flow_finish_missed",
        f"{execution}: {message}",
        flow_group=execution.flow_group,
        flow_name=execution.flow_name,
        execution_id=execution.execution_id,
    )
    cancel_execution(execution, message)


# --- jobs whose worker died ------------------------------------------------------------


def resend_unclaimed() -> int:
    """A dispatched job no worker claimed within a lease gets its message
    again (same attempt: the claim makes duplicates harmless), so a message
    lost with a dying worker or broker does not wait for the start deadline."""
    resent = 0
    with transaction.atomic():
        stale = JobExecution.objects.select_for_update(skip_locked=True).filter(
            status=JobStatus.ORCHESTRATED, lease_until__lt=timezone.now()
        )
        for job in stale[:500]:
            job.lease_until = _resend_after()
            job.save(update_fields=["lease_until"])
            _send(job)
            resent += 1
    if resent:
        logger.warning("sent %d unclaimed job message(s) again", resent)
    return resent


def sweep_lost_jobs() -> int:
    """RUNNING jobs whose worker stopped heartbeating past the lease: a new
    attempt is dispatched (a redelivery, not a retry). Safe from many processes."""
    now = timezone.now()
    lost = 0
    stale = JobExecution.objects.filter(status=JobStatus.RUNNING, lease_until__lt=now).values_list(
        "execution_id", flat=True
    )
    for execution_pk in set(stale):
        with transaction.atomic():
            execution = (
                FlowExecution.objects.select_for_update(skip_locked=True).filter(pk=execution_pk).first()
            )
            if execution is None:
                continue
            for job in JobExecution.objects.select_for_update().filter(
                execution=execution, status=JobStatus.RUNNING, lease_until__lt=now
            ):
                cancelled = job.cancel_requested or execution.cancel_requested
                # The dead worker's run record ends here.
                JobState.objects.filter(job=job, attempt=job.attempt, ended_at__isnull=True).update(
                    status=JobStatus.CANCELLED if cancelled else JobStatus.FAILED,
                    message=f"Worker {job.worker} stopped heartbeating.",
                    ended_at=now,
                )
                if cancelled:
                    _set_job(
                        job, JobStatus.CANCELLED, f"Cancelled; worker {job.worker} stopped heartbeating."
                    )
                elif job.redeliveries >= settings.JOB_MAX_REDELIVERIES:
                    _set_job(
                        job,
                        JobStatus.FAILED,
                        f"Poison job: its worker stopped heartbeating without reporting on each of "
                        f"{job.redeliveries + 1} deliveries (the last on {job.worker}); not delivered "
                        f"again (JOB_MAX_REDELIVERIES={settings.JOB_MAX_REDELIVERIES}). Its code "
                        "probably kills or wedges the worker process; the job's logs show how far it got.",
                        redeliveries=job.redeliveries + 1,
                        lease_until=None,
                    )
                else:
                    _set_job(
                        job,
                        JobStatus.PENDING,
                        f"Worker {job.worker} stopped heartbeating; redelivering "
                        f"({job.redeliveries + 1} of {settings.JOB_MAX_REDELIVERIES}).",
                        cause=TryCause.REDELIVERY,
                        attempt=job.attempt + 1,
                        redeliveries=job.redeliveries + 1,
                        lease_until=None,
                    )
                lost += 1
            reevaluate_execution(execution)
    if lost:
        logger.warning("redelivered %d job(s) whose worker died", lost)
    return lost
