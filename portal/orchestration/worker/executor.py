"""The SpecExecutor side: what a Celery worker does with one JobSpec.

A message is acted on only if it claims its job: the conditional UPDATE
from ORCHESTRATED to RUNNING for the message's (job, attempt) succeeds for
exactly one delivery, so a redelivered or stale message never launches a job
twice. Status updates carry (attempt, rank) and only ever move forward.
While the job runs a heartbeat (heartbeat.py) extends its lease, records
Spark stage progress and notices a kill request. A run is a `JobRun`: its
steps, in order, are check, start Spark, read the spec (decrypted and
parsed once, then handed to every step), recover, pull, commit, conclude.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.crypto.encrypted import unwrap_flow_key
from portal.crypto.errors import EncryptionError
from portal.keys.services import decrypt_properties, is_encrypted, secret_values
from portal.orchestration.control.actions import enqueue_for, process_id
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
from portal.orchestration.signals import job_run_changed
from portal.orchestration.state import cdcpositions, joblogs, lakestate, statestore
from portal.orchestration.state.commitstore import FailpointCrash, failpoint
from portal.orchestration.state.glance import note_run
from portal.orchestration.state.publish import DatasetCommit, commit
from portal.orchestration.state.recovery import RecoveryReport, exclude_datasets, recover
from portal.orchestration.worker import guard, quota_spark, sparkctx
from portal.orchestration.worker.figures import in_words, summarise
from portal.orchestration.worker.heartbeat import JobHeartbeat, lease_until
from portal.orchestration.worker.submit import run_submitted, uses_spark_submit
from portal.pipeline import landing, run_job, usernode
from portal.pipeline.columnrules import needs_key
from portal.pipeline.destinations.commitplan import cleanup_task_output
from portal.pipeline.destinations.delivery import failure_summary
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.sources import cdc as cdc_source
from portal.pipeline.taskstate import SUCCEEDED
from portal.topology import policy, reach

logger = logging.getLogger(__name__)


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
            lease_until=lease_until(),
            message="",
            log_excerpt="",  # the previous attempt's; this one's come with its heartbeats
            driver_log_excerpt="",
        )
        if not won:
            return None
        job = JobExecution.objects.select_related("execution").get(pk=job_id)
        if FlowExecution.objects.filter(pk=job.execution_id, status=ExecutionStatus.COMPILED).update(
            status=ExecutionStatus.RUNNING, started_at=now
        ):
            job.execution.status, job.execution.started_at = ExecutionStatus.RUNNING, now
            note_run(job.execution)
        job_run_changed.send(sender=JobExecution, job=job, status=JobStatus.RUNNING, attempt=attempt)
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
            job.status, job.message = status, fields.get("message", job.message)
            job_run_changed.send(
                sender=JobExecution,
                job=job,
                status=status,
                attempt=attempt,
                task_states=fields.get("task_states"),
            )
    if not moved:
        logger.info("ignored %s for %s attempt %d: the job has moved on", status, job, attempt)
    return bool(moved)


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
        run = JobRun(job, attempt, worker, log, cancel, heartbeat, run_state)
        try:
            return _run(run, dict(jobspec))
        except FailpointCrash:
            raise  # a simulated crash unwinds as if the process died (commitstore)
        # BaseException too: a job's code that calls sys.exit() (say, on
        # import) or raises KeyboardInterrupt fails that job, not the worker.
        # Unreported, its lease would lapse and the job be redelivered, and
        # Celery's thread pool reports the delivery as a lost worker.
        except BaseException as exc:
            logger.exception("job %s attempt %d failed", job, attempt)
            return run.finish(JobStatus.FAILED, f"{type(exc).__name__}: {_exception_text(exc)}", exc=exc)
        finally:
            log.close()


def _exception_text(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"the job's code called sys.exit({exc.code!r})"
    return str(exc) or "(no message)"


def _run(run: JobRun, message: dict[str, Any]) -> str:
    """The steps of one run; `message` is the JobSpec as the orchestrator sent it (ciphertext)."""
    # The worker's own security check, before anything starts (it trusts nothing the web tier sent).
    refused = guard.refusal(run.job, message) or quota_spark.sizing_refusal(run.job)
    if refused:
        return run.finish(JobStatus.FAILED, refused)
    # Every connection the job opens is judged against the portal's own databases (asked now: a
    # restarted server has a new identity), in this process and, through the JobSpec, on a cluster.
    run.portal_databases = reach.portal_landings()
    landing.register(run.portal_databases)
    run.start_spark(message)
    if run.cancel.is_set():
        return run.finish(
            JobStatus.CANCELLED, "Cancelled before it started; nothing published.", with_log=False
        )
    try:
        spec = run.read_spec(message)
    except EncryptionError as error:
        return run.finish(JobStatus.FAILED, f"Cannot decrypt the job's secrets: {error}")
    recovery = run.recover(spec)
    same_execution = sorted(u for u, d in recovery.skipped.items() if d.execution_id == spec.execution_id)
    if same_execution:
        # Their task output lies where this attempt's tasks would write.
        return run.finish(
            JobStatus.FAILED,
            f"Stopped before pulling data: {', '.join(same_execution)} still has commit steps from an "
            "earlier attempt of this execution that could not be redone, and this attempt would "
            f"overwrite their task output. {recovery.skipped[same_execution[0]].message}",
        )
    delivered = run.delivered(spec)
    states, progress = run.pull(spec, message, set(recovery.skipped) | set(delivered))
    if run.cancel.is_set():
        cleanup_task_output(spec)
        figures = summarise(spec, states, committed=[])  # nothing delivered
        if run.heartbeat.gave_up:  # no Spark executor came in SPARK_EXECUTOR_WAIT_LIMIT_SECONDS
            return run.finish(JobStatus.FAILED, run.heartbeat.gave_up, **figures, **progress)
        return run.finish(JobStatus.CANCELLED, "Cancelled; nothing published.", **figures, **progress)
    failpoint("after_task_output")
    commits = run.commit(spec, states, delivered)
    return run.conclude(spec, states, progress, recovery, commits, delivered)


@dataclass
class JobRun:
    """One delivery of a job on this worker: what its steps share, and the one way it ends."""

    job: JobExecution
    attempt: int
    worker: str
    log: joblogs.JobLog
    cancel: threading.Event
    heartbeat: JobHeartbeat
    run_state: JobState
    spark: Any = None
    submitted: bool = False  # a cluster job: it runs as its own application (spark-submit)
    portal_databases: list[landing.Landing] = field(default_factory=list)

    def finish(
        self,
        status: str,
        message: str,
        *,
        exc: BaseException | None = None,
        with_log: bool = True,
        **fields: Any,
    ) -> str:
        """Report how the run ended (masked, with the log's tails unless `with_log` is off) in the
        job's status and its run history; returns it for the task log."""
        message = joblogs.mask(message, self.log.secrets)
        self.log.outcome(status, message, exc)
        if with_log:
            fields.update(self.log.fields())  # with the outcome line
        report(self.job, self.attempt, status, message=message[:4000], **fields)
        statestore.finish_job_state(self.run_state, status, message)
        return status.lower()

    def start_spark(self, message: dict[str, Any]) -> None:
        """The worker's SparkSession for this job. A cluster job runs as its own application; the
        worker's local session only serves the commit steps' Hadoop filesystem calls."""
        self.submitted = uses_spark_submit(message)
        master = (
            settings.SPARK_MASTER if self.submitted else message.get("spark_master") or settings.SPARK_MASTER
        )
        self.spark = sparkctx.session_for(master, message.get("spark_conf"))
        self.heartbeat.attach(self.spark, submitted=self.submitted)
        self.log.attach(self.spark)
        self.log.write(sparkctx.application_line(self.spark))
        # The UI staff reach through the portal's proxy (sparkui.py) while the job runs: this
        # session's, unless the job runs as an application of its own (spark-submit).
        ui = "" if self.submitted else self.spark.sparkContext.uiWebUrl or ""
        JobExecution.objects.filter(pk=self.job.pk).update(spark_ui_url=ui)

    def read_spec(self, message: dict[str, Any]) -> JobSpec:
        """The one JobSpec of this run, with its properties decrypted here, in this worker's memory
        only, before recovery (an earlier run's jdbc_publish steps name their password by
        property). The JobSpec row, the Celery message, logs and TaskStates keep the ciphertext."""
        encrypted = message["properties"]
        properties = decrypt_properties(encrypted)
        self.log.hide(secret_values(encrypted, properties))
        # What the pipeline judges its connections by: the portal's own databases (the worker's,
        # never the message's) and the names of the hop's data nodes (the guard checked them).
        own = [found.to_dict() for found in self.portal_databases]
        nodes = {
            role: str(properties.get(f"flowport.hop.{role}") or "") for role in ("source", "destination")
        }
        spec = JobSpec.from_dict(
            {
                **message,
                "properties": properties,
                "log_tag": self.log.tag,
                "scheduler_pool": sparkctx.fair_pool(self.spark, quota_spark.spark_pool(self.job)),
                "spark_sizing": quota_spark.spark_sizing(self.job),  # a submitted job's own application
                landing.SPEC_KEY: own,
                landing.NODES_KEY: nodes,
                usernode.SPEC_KEY: {
                    role: bounds.to_dict()
                    for role, name in nodes.items()
                    if (bounds := policy.bounds_named(name)) is not None
                },
            }
        )
        if needs_key(encrypted):  # the column rules' key: in this memory only, never shipped
            spec.column_key = unwrap_flow_key(encrypted, "columns.encrypt")
        return spec

    def recover(self, spec: JobSpec) -> RecoveryReport:
        """Finish what earlier runs left in the commit-step store."""
        recovery = recover(spec, initializer=sparkctx.activator(self.spark, self.log.tag))
        self.run_state.recovered = recovery.to_dict()
        if recovery.datasets:
            self.log.write(f"recovery: {recovery.summary()}")
        return recovery

    def delivered(self, spec: JobSpec) -> dict[str, str]:
        """The datasets an earlier attempt of this execution committed (directly, or through this
        attempt's recovery): this attempt does not pull them again (statestore.delivered_by)."""
        found = statestore.delivered_by(
            spec.execution_id, spec.flow_group, spec.flow_name, spec.job_name, spec.flow_id
        )
        if found:
            self.log.write(
                f"already delivered by an earlier attempt of execution {spec.execution_id}, not pulled "
                f"again: {', '.join(sorted(found))}"
            )
        return found

    def pull(
        self, spec: JobSpec, message: dict[str, Any], skipped: set[str]
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Run the pipeline from the previous watermarks (read after recovery moved them), the
        `skipped` datasets left out; the TaskStates and the job's final Spark progress (the last
        heartbeat's figures would otherwise stay, e.g. 0.475 on a committed job)."""
        spec.previous_watermarks, spec.previous_schemas = statestore.previous_state(
            spec.flow_group, spec.flow_name, spec.job_name, spec.flow_id
        )
        for line in lakestate.catch_up(spec, spec.previous_watermarks):  # an Iceberg table may be ahead
            self.log.write(line)
        if others := cdcpositions.hand_over(self.job, spec):  # a cdc flow's other destinations
            self.log.write(f"the other destinations' log positions: {others}")
        self.log.write(
            f"attempt {self.attempt} on {self.worker}; previous watermarks: {spec.previous_watermarks or 'none'}"
        )
        run_spec = exclude_datasets(spec, skipped)
        states: list[dict[str, Any]] = []
        if run_spec is not None and self.submitted:
            # The driver decrypts on the cluster; the file it reads holds ciphertext.
            encrypted = message["properties"]
            shipped = {
                k: encrypted.get(k, v) if is_encrypted(encrypted.get(k, "")) else v
                for k, v in run_spec.properties.items()
            }
            submitted = {**run_spec.to_dict(), "properties": shipped}
            states = run_submitted(submitted, self.cancel, output_log=self.log.driver_path)
            for state in states:
                self.log.task_state(state)
        elif run_spec is not None:
            states = run_job(self.spark, run_spec, cancel_event=self.cancel, on_task_state=self.task_done)
        states = [s for s in states if s["dataset_urn"] not in skipped]
        ran_here = run_spec is not None and not self.submitted
        return states, {"progress": self.heartbeat.progress()} if ran_here else {}

    def task_done(self, state: dict[str, Any]) -> None:
        """A task of the pull finished (its output staged), the pull goes on: logged; a crash point."""
        self.log.task_state(state)
        failpoint("while_pulling", str(state.get("dataset_urn") or ""))

    def commit(
        self, spec: JobSpec, states: list[dict[str, Any]], delivered: dict[str, str]
    ) -> dict[str, DatasetCommit]:
        """Per dataset, the commit steps stored in one transaction, then run (publish.py); then the
        source acknowledged up to those and to what an earlier attempt of the execution `delivered`."""
        commits = commit(
            spec,
            states,
            job=self.job,
            attempt=self.attempt,
            initializer=sparkctx.activator(self.spark, self.log.tag),
        )
        self.run_state.datasets = {urn: c.to_dict() for urn, c in sorted(commits.items())}
        if all(c.done for c in commits.values()):
            cleanup_task_output(spec)  # else the unfinished steps still need it
        executed = {u: c.executed for u, c in sorted(commits.items())}
        self.log.write(f"commit steps executed per dataset: {executed}")
        self.acknowledge_source(spec, commits, delivered)
        return commits

    def acknowledge_source(
        self, spec: JobSpec, commits: dict[str, DatasetCommit], delivered: dict[str, str]
    ) -> None:
        """A change-data-capture source releases its log as soon as every destination committed,
        not at the next run's start. The watermarks just committed stay the truth: a crash or a
        refusal here only leaves the slot behind until the next run's start releases it, and no
        change is read into the destination twice."""
        committed = {urn: mark for urn, mark in delivered.items() if mark}
        committed.update({urn: c.watermark for urn, c in commits.items() if c.done and c.watermark})
        if not committed:
            return
        failpoint("before_source_ack")
        try:
            cdcpositions.hand_over(self.job, spec)  # the slot is released to the lowest of them all
            if cdc_source.acknowledge(spec, committed):
                self.log.write(
                    "the source's log was released up to what every destination's tables committed"
                )
        except Exception as error:  # the next run's start releases it
            self.log.write(f"the source's log was not released now: {type(error).__name__}: {error}")

    def earlier_states(self, states: list[dict[str, Any]], finished: set[str]) -> list[dict[str, Any]]:
        """The task states an earlier attempt of this execution recorded for the datasets this one
        did not pull but saw finished (delivered before, or their commit finished now): the rows,
        files and figures are theirs, so the execution still says what it delivered and where."""
        pulled = {s.get("dataset_urn") for s in states}
        stored = JobExecution.objects.filter(pk=self.job.pk).values_list("task_states", flat=True).first()
        return [
            s
            for s in stored or []
            if s.get("dataset_urn") in finished
            and s.get("dataset_urn") not in pulled
            and s.get("status") == SUCCEEDED
        ]

    def conclude(
        self,
        spec: JobSpec,
        states: list[dict[str, Any]],
        progress: dict[str, Any],
        recovery: RecoveryReport,
        commits: dict[str, DatasetCommit],
        delivered: dict[str, str],
    ) -> str:
        """End the run on its first problem (an unfinished commit, a failed task, a dataset skipped
        because its earlier commit could not be finished, nothing run), else as COMMITTED, with the
        delivered figures and what recovery did. A run never says COMMITTED while a dataset of it
        was left behind."""
        pulled = states
        states = self.earlier_states(states, {*delivered, *recovery.recovered}) + states
        summary = {**progress, **summarise(spec, states, committed=[u for u, c in commits.items() if c.done])}
        skipped = recovery.skipped
        notes = []
        if recovery.recovered:
            notes.append(
                f"Finished the commit of {len(recovery.recovered)} dataset(s) left by an earlier run first."
            )
        if delivered:
            notes.append(
                f"{len(delivered)} dataset(s) already delivered by an earlier attempt of this execution, "
                f"not pulled again: {', '.join(sorted(delivered))}."
            )
        unfinished = sorted(urn for urn, c in commits.items() if not c.done)
        failed = [s for s in pulled if s["status"] != SUCCEEDED]
        problem = ""
        if unfinished:
            problem = commits[unfinished[0]].error
            if len(unfinished) > 1:
                problem = (
                    f"{len(unfinished)} dataset commits failed ({', '.join(unfinished)}); first: {problem}"
                )
        elif failed:
            problem = failure_summary(failed, len(states))
        elif skipped:
            first = skipped[min(skipped)]
            problem = (
                f"{len(skipped)} dataset(s) waiting to be finished ({', '.join(sorted(skipped))}): not "
                f"delivered by this run{'' if states else ', nothing else ran'}. {first.message}"
            )
        if problem:
            return self.finish(JobStatus.FAILED, " ".join([problem, *notes]), task_states=states, **summary)
        if not states and not notes:  # say it: a folder of files at a files node's root is no dataset
            notes.append(
                "Nothing to read: the source listed no dataset (a files node reads each sub-folder of its "
                "root as one dataset, source.files.dataset.level)."
            )
        message = " ".join([f"{len(pulled)} task(s), {in_words(summary)}.", *notes])
        return self.finish(JobStatus.COMMITTED, message, task_states=states, **summary)
