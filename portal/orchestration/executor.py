"""The SpecExecutor side: what a Celery worker does with one JobSpec.

A message is acted on only if it claims its job: the conditional UPDATE
from ORCHESTRATED to RUNNING for the message's (job, attempt) succeeds for
exactly one delivery, so a redelivered or stale message never launches a job
twice. Status updates carry (attempt, rank) and only ever move forward.
While the job runs a heartbeat extends its lease (a worker that dies stops
extending it and the orchestrator redelivers the job), records Spark stage
progress and notices a kill request.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.keys.errors import EncryptionError
from portal.keys.services import decrypt_properties, is_encrypted, secret_values
from portal.orchestration import guard, joblogs, sparkctx, statestore
from portal.orchestration.actions import enqueue_for, process_id
from portal.orchestration.commitstore import FailpointCrash, failpoint
from portal.orchestration.models import (
    JOB_FINISHED,
    JOB_STATUS_RANK,
    ActionKind,
    ExecutionStatus,
    FlowExecution,
    JobExecution,
    JobState,
    JobStatus,
)
from portal.orchestration.publish import commit
from portal.orchestration.recovery import exclude_datasets, recover
from portal.orchestration.submit import run_submitted, uses_spark_submit
from portal.pipeline import run_job
from portal.pipeline.delivery import Delivery, delivery, failure_summary
from portal.pipeline.errors import ConfigError
from portal.pipeline.logtag import tag_thread
from portal.pipeline.publisher import cleanup_task_output
from portal.pipeline.taskstate import SUCCEEDED
from portal.pipeline.watermarks import value_of

logger = logging.getLogger(__name__)


def _lease() -> timezone.datetime:
    return timezone.now() + timedelta(seconds=settings.WORKER_LEASE_SECONDS)


def claim(job_id: int, attempt: int, worker: str) -> JobExecution | None:
    """Move the job to RUNNING for this delivery, or None if another
    delivery (or a newer attempt, or a kill) got there first."""
    now = timezone.now()
    with transaction.atomic():
        won = JobExecution.objects.filter(pk=job_id, attempt=attempt, status=JobStatus.ORCHESTRATED).update(
            status=JobStatus.RUNNING,
            status_rank=JOB_STATUS_RANK[JobStatus.RUNNING],
            worker=worker,
            started_at=now,
            ended_at=None,
            lease_until=_lease(),
            message="",
            log_excerpt="",  # the previous attempt's; this one's come with its heartbeats
            driver_log_excerpt="",
        )
        if not won:
            return None
        job = JobExecution.objects.select_related("execution").get(pk=job_id)
        FlowExecution.objects.filter(pk=job.execution_id, status=ExecutionStatus.COMPILED).update(
            status=ExecutionStatus.RUNNING, started_at=now
        )
    return job


def report(job: JobExecution, attempt: int, status: str, **fields: Any) -> bool:
    """Record a status if it moves the job forward; a finished job makes
    the orchestrator re-evaluate its execution."""
    rank = JOB_STATUS_RANK[status]
    if status in JOB_FINISHED:
        fields.setdefault("ended_at", timezone.now())
    with transaction.atomic():
        moved = JobExecution.objects.filter(pk=job.pk, attempt=attempt, status_rank__lt=rank).update(
            status=status, status_rank=rank, **fields
        )
        if moved and status in JOB_FINISHED:
            enqueue_for(job.execution, ActionKind.REEVALUATE)
    if not moved:
        logger.info("ignored %s for %s attempt %d: the job has moved on", status, job, attempt)
    return bool(moved)


class JobHeartbeat:
    """Keeps the job's lease, progress and kill flag in step while it runs."""

    def __init__(self, job: JobExecution, attempt: int, cancel: threading.Event, log: joblogs.JobLog) -> None:
        self.job, self.attempt, self.cancel, self.log = job, attempt, cancel, log
        self.spark: Any = None  # set once the SparkSession is there
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job.pk}", daemon=True)

    def __enter__(self) -> JobHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        from django.db import connection

        interval = max(0.5, min(1.0, settings.WORKER_HEARTBEAT_SECONDS))
        beats = 0
        try:
            while not self._stop.wait(interval):
                beats += 1
                updates: dict[str, Any] = {}
                if beats * interval >= settings.WORKER_HEARTBEAT_SECONDS:
                    beats = 0
                    # The tails are masked: the log page shows them while the job runs.
                    updates = {"lease_until": _lease(), "progress": self.progress(), **self.log.fields()}
                    if self.log.records_so_far:  # tasks finished so far; the final report sets the total
                        updates["processed_count"] = self.log.records_so_far
                row = JobExecution.objects.filter(pk=self.job.pk, attempt=self.attempt)
                if updates:
                    row.filter(status=JobStatus.RUNNING).update(**updates)
                if row.filter(cancel_requested=True).exists() or not row.exists():
                    self.cancel.set()
        except Exception:
            logger.exception("heartbeat of %s stopped", self.job)
        finally:
            connection.close()

    def progress(self) -> dict[str, Any]:
        """The job's Spark progress in this process ({} when it runs elsewhere or is not known)."""
        if self.spark is None:
            return {}
        try:
            # Imported here: progress imports pyspark, which processes that never run Spark skip.
            from portal.pipeline.progress import job_progress
        except ImportError:
            return {}
        try:
            return job_progress(self.spark, self.job.job_name, self.job.execution.execution_id)
        except Exception:  # progress is best effort; the job must not fail for it
            logger.debug("no progress for %s", self.job, exc_info=True)
            return {}


def _summarise(
    spec: dict[str, Any], states: list[dict[str, Any]], committed: list[str] | None = None
) -> dict[str, Any]:
    """The job's status figures: what was delivered (rows published by the datasets in `committed`,
    whose commit finished) and the watermarks checked in, not what was extracted."""
    lows: dict[str, str] = {}
    for state in sorted(states, key=lambda s: (s.get("work_unit") or {}).get("range_index", 0)):
        lows.setdefault(state["dataset_urn"], value_of(state.get("low_watermark")) or "")
    try:
        figures = delivery(spec, states, committed) if states else Delivery()
    except ConfigError:  # a bad job.commit.policy: the job fails on it; nothing was delivered
        figures = Delivery(read=sum(int(s.get("records_extracted") or 0) for s in states))

    def one(values: dict[str, str]) -> str:
        if not values:
            return ""
        return next(iter(values.values())) if len(values) == 1 else json.dumps(values, sort_keys=True)

    return {
        "processed_count": figures.delivered,
        "records_read": figures.read,
        "records_rejected": figures.rejected,
        "low_watermark": one(lows),
        "high_watermark": one(figures.watermarks),
    }


def _figures(summary: dict[str, Any]) -> str:
    """``10 record(s) delivered (12 read, 2 rejected)``."""
    return (
        f"{summary['processed_count']:,} record(s) delivered ({summary['records_read']:,} read, "
        f"{summary['records_rejected']:,} rejected)"
    )


def _activate(spark: Any, log_tag: str) -> Callable[[], None]:
    """Make `spark` the active session of the calling thread (the fs layer
    finds Hadoop file systems through it) and tag its Spark work with the
    job (its driver log)."""

    def initializer() -> None:
        try:
            spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
            tag_thread(spark, log_tag)
        except Exception:  # best effort: local paths do not need it
            logger.debug("could not set the active SparkSession", exc_info=True)

    return initializer


def execute_job(job_id: int, attempt: int, jobspec: dict[str, Any]) -> str:
    """Run one delivery of a job; returns what happened (for the task log)."""
    worker = f"{process_id()}:{threading.current_thread().name}"
    job = claim(job_id, attempt, worker)
    if job is None:
        return "duplicate"
    log = joblogs.JobLog(job.execution.execution_id, job.job_name, attempt)
    cancel = threading.Event()
    run_state = statestore.start_job_state(job, attempt, worker)
    # The heartbeat starts before anything slow (Spark start-up included), so
    # the lease never lapses while this worker is alive.
    with JobHeartbeat(job, attempt, cancel, log) as heartbeat:
        try:
            return _run(job, attempt, dict(jobspec), worker, log, cancel, heartbeat, run_state)
        except FailpointCrash:
            raise  # a simulated crash unwinds as if the process died (commitstore)
        # BaseException too: a job's code that calls sys.exit() (say, on
        # import) or raises KeyboardInterrupt fails that job, not the worker.
        # Unreported, its lease would lapse and the job be redelivered, and
        # Celery's thread pool reports the delivery as a lost worker.
        except BaseException as exc:
            logger.exception("job %s attempt %d failed", job, attempt)
            message = joblogs.mask(f"{type(exc).__name__}: {_exception_text(exc)}", log.secrets)
            log.outcome(JobStatus.FAILED, message, exc)
            report(job, attempt, JobStatus.FAILED, message=message[:4000], **log.fields())
            statestore.finish_job_state(run_state, JobStatus.FAILED, message)
            return "failed"
        finally:
            log.close()


def _exception_text(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"the job's code called sys.exit({exc.code!r})"
    return str(exc) or "(no message)"


def _finish(
    job: JobExecution,
    attempt: int,
    run_state: JobState,
    status: str,
    message: str,
    log: joblogs.JobLog,
    **fields: Any,
) -> str:
    message = joblogs.mask(message, log.secrets)
    log.outcome(status, message)
    if "log_excerpt" in fields:
        fields.update(log.fields())  # with the outcome line
    report(job, attempt, status, message=message[:4000], **fields)
    statestore.finish_job_state(run_state, status, message)
    return status.lower()


def _run(
    job: JobExecution,
    attempt: int,
    spec: dict[str, Any],
    worker: str,
    log: joblogs.JobLog,
    cancel: threading.Event,
    heartbeat: JobHeartbeat,
    run_state: JobState,
) -> str:
    # The worker's own security check, before anything starts (it trusts nothing the web tier sent).
    refused = guard.refusal(job, spec)
    if refused:
        return _finish(job, attempt, run_state, JobStatus.FAILED, refused, log, **log.fields())
    submitted = uses_spark_submit(spec)
    master = spec.get("spark_master") or settings.SPARK_MASTER
    # A cluster job runs as its own application; the worker's local session
    # only serves the commit steps' Hadoop filesystem calls.
    spark = sparkctx.session_for(settings.SPARK_MASTER if submitted else master, spec.get("spark_conf"))
    heartbeat.spark = spark
    log.attach(spark)
    JobExecution.objects.filter(pk=job.pk).update(spark_ui_url=spark.sparkContext.uiWebUrl or "")
    if cancel.is_set():
        return _finish(
            job,
            attempt,
            run_state,
            JobStatus.CANCELLED,
            "Cancelled before it started; nothing published.",
            log,
        )

    # ---- the job's properties, as the pipeline and the commit steps need them ----------
    # Decrypted here, in this worker's memory only, before recovery (an earlier
    # run's jdbc_publish steps name their password by property). The JobSpec
    # row, the Celery message, logs and TaskStates keep the ciphertext.
    try:
        encrypted = spec["properties"]
        properties = decrypt_properties(encrypted)
    except EncryptionError as error:
        message = f"Cannot decrypt the job's secrets: {error}"
        return _finish(job, attempt, run_state, JobStatus.FAILED, message, log, **log.fields())
    log.hide(secret_values(encrypted, properties))
    spec = {**spec, "properties": properties, "log_tag": log.tag}

    # ---- recovery: finish what earlier runs left in the commit-step store ---------------
    recovery = recover(spec, properties, initializer=_activate(spark, log.tag))
    run_state.recovered = recovery.to_dict()
    if recovery.datasets:
        log.write(f"recovery: {recovery.summary()}")
    skipped = set(recovery.skipped)
    same_execution = sorted(u for u, d in recovery.skipped.items() if d.execution_id == spec["execution_id"])
    if same_execution:
        # Their task output lies where this attempt's tasks would write.
        message = (
            f"Stopped before pulling data: {', '.join(same_execution)} still has commit steps from an "
            "earlier attempt of this execution that could not be redone, and this attempt would "
            f"overwrite their task output. {recovery.skipped[same_execution[0]].message}"
        )
        return _finish(job, attempt, run_state, JobStatus.FAILED, message, log, **log.fields())

    # ---- pull: previous watermarks (after recovery moved them), skipped datasets left out ----
    watermarks, schemas = statestore.previous_state(
        spec["flow_group"], spec["flow_name"], spec["job_name"], spec.get("flow_id")
    )
    spec["previous_watermarks"], spec["previous_schemas"] = watermarks, schemas
    log.write(f"attempt {attempt} on {worker}; previous watermarks: {watermarks or 'none'}")
    run_spec = exclude_datasets(spec, skipped)
    states = []
    if run_spec is not None:
        if submitted:
            # The driver decrypts on the cluster; the file it reads holds ciphertext.
            shipped = {
                k: encrypted.get(k, v) if is_encrypted(encrypted.get(k, "")) else v
                for k, v in run_spec["properties"].items()
            }
            states = run_submitted({**run_spec, "properties": shipped}, cancel, output_log=log.driver_path)
            for state in states:
                log.task_state(state)
        else:
            states = run_job(spark, run_spec, cancel_event=cancel, on_task_state=log.task_state)
    states = [s for s in states if s["dataset_urn"] not in skipped]
    summary = _summarise(spec, states, committed=[])  # nothing delivered until the commit
    if run_spec is not None and not submitted:
        # The last heartbeat's figures would otherwise stay, e.g. 0.475 on a committed job.
        summary["progress"] = heartbeat.progress()
    if cancel.is_set():
        cleanup_task_output(spec)
        return _finish(
            job,
            attempt,
            run_state,
            JobStatus.CANCELLED,
            "Cancelled; nothing published.",
            log,
            **summary,
            **log.fields(),
        )
    failpoint("after_task_output")

    # ---- commit: per dataset, steps stored in one transaction, then run ----------------
    commits = commit(
        spec, states, properties=properties, job=job, attempt=attempt, initializer=_activate(spark, log.tag)
    )
    run_state.datasets = {urn: c.to_dict() for urn, c in sorted(commits.items())}
    unfinished = sorted(urn for urn, c in commits.items() if not c.done)
    if not unfinished:
        cleanup_task_output(spec)  # else the unfinished steps still need it
    log.write(f"commit steps executed per dataset: { {u: c.executed for u, c in sorted(commits.items())} }")

    summary.update(_summarise(spec, states, committed=[u for u, c in commits.items() if c.done]))
    failed = [s for s in states if s["status"] != SUCCEEDED]
    notes = []
    if recovery.recovered:
        notes.append(
            f"Finished the commit of {len(recovery.recovered)} dataset(s) left by an earlier run first."
        )
    if skipped:
        notes.append(
            f"Skipped {len(skipped)} dataset(s) whose earlier commit could not be finished: "
            f"{', '.join(sorted(skipped))}."
        )
    problem = ""
    if unfinished:
        problem = commits[unfinished[0]].error
        if len(unfinished) > 1:
            problem = f"{len(unfinished)} dataset commits failed ({', '.join(unfinished)}); first: {problem}"
    elif failed:
        problem = failure_summary(failed, len(states))
    elif skipped and not states:
        problem = (
            "Nothing ran: every dataset of the job was skipped. " + recovery.skipped[min(skipped)].message
        )
    fields = {"task_states": states, **summary, **log.fields()}
    if problem:
        return _finish(job, attempt, run_state, JobStatus.FAILED, " ".join([problem, *notes]), log, **fields)
    message = " ".join([f"{len(states)} task(s), {_figures(summary)}.", *notes])
    return _finish(job, attempt, run_state, JobStatus.COMMITTED, message, log, **fields)
