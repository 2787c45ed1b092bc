"""The heartbeat of a running job: while the job runs it extends the job's
lease (a worker that dies stops extending it and the orchestrator redelivers
the job), records Spark stage progress and the records counted so far, and
notices a kill request.

It also tells what Spark did to the job — which application runs it, executors lost or regained,
task attempts Spark retries, no executors to run on — twice: as lines of the job's log, and as
entries the job's page lists (`SparkRecord`, kept in the job's progress under ``"spark"``, so the
final progress the worker reports keeps them)."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from portal.events.services import raise_event
from portal.orchestration.models import JobExecution, JobStatus
from portal.orchestration.state import joblogs

logger = logging.getLogger(__name__)

SPARK_KEY = "spark"  # the job's progress[SPARK_KEY]: SparkRecord.to_dict()
EVENTS_KEPT = 40  # the most recent; the job's log keeps them all
# The kinds of SparkRecord events, as the job's page names them.
EXECUTORS_LOST, EXECUTORS_ADDED = "executors_lost", "executors_added"
TASKS_FAILED = "task_attempts_failed"
NO_EXECUTORS, EXECUTORS_BACK = "no_executors", "executors_back"
RUNNING, WAITING = "RUNNING", "WAITING"  # the application, as the job sees it
# The event (dashboard, events API) raised once per attempt when a job starts waiting for executors.
WAITING_EVENT = "job.waiting_for_spark_executors"
# What an operator can do about a job waiting for executors: said on the job's page and in the event.
OPERATOR_OPTIONS = (
    "What to do: free cores on that Spark master (another application may hold them all: stop it, "
    "or lower its spark.cores.max), start or restart its Spark workers, lower spark.cores.max, "
    "spark.executor.cores or spark.executor.memory in this executor's Spark settings (topology) "
    "so every worker's application fits, or move the flow to another executor."
)


class SparkRecord:
    """The Spark application that runs the job and what Spark did to the job, as plain data.
    Written by the heartbeat thread and the job's thread, read by both: each change holds a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.application: dict[str, Any] = {}
        self.events: list[dict[str, Any]] = []
        self.earlier = 0  # events no longer kept (the log has them)

    def started(self, application_id: str, master: str, executors: int | None, *, submitted: bool) -> None:
        with self._lock:
            self.application = {
                "application_id": application_id,
                "master": master,
                # yarn/k8s: the job runs as an application of its own (spark-submit); this is the
                # worker's local one, which only serves the commit steps.
                "submitted": submitted,
                "state": WAITING if executors == 0 else RUNNING,
                "executors": executors,
                "seen_at": _now(),
            }

    def seen(self, state: str, executors: int | None = None) -> None:
        with self._lock:
            if self.application:
                self.application.update(state=state, seen_at=_now())
                if executors is not None:
                    self.application["executors"] = executors

    def add(self, kind: str, message: str, **figures: int) -> None:
        with self._lock:
            self.events.append({"at": _now(), "kind": kind, "message": message, **figures})
            if len(self.events) > EVENTS_KEPT:
                self.earlier += len(self.events) - EVENTS_KEPT
                del self.events[:-EVENTS_KEPT]

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            if not self.application and not self.events:
                return {}
            return {
                **self.application,
                "events": [dict(event) for event in self.events],
                "earlier_events": self.earlier,
            }


def _now() -> str:
    return timezone.now().isoformat(timespec="seconds")


def lease_until() -> datetime:
    """The end of a lease taken or extended now."""
    return timezone.now() + timedelta(seconds=settings.WORKER_LEASE_SECONDS)


class JobHeartbeat:
    """Keeps the job's lease, progress and kill flag in step while it runs."""

    def __init__(self, job: JobExecution, attempt: int, cancel: threading.Event, log: joblogs.JobLog) -> None:
        self.job, self.attempt, self.cancel, self.log = job, attempt, cancel, log
        self.spark: Any = None  # set once the SparkSession is there (attach)
        self.record = SparkRecord()
        self._waiting = False  # the job's message says it waits for Spark executors
        self._waiting_since = 0.0  # time.monotonic() when it began to
        self._wait_alert: str = ""  # a WAITING_EVENT the next beat raises
        # Why the job was given up (the wait for executors passed SPARK_EXECUTOR_WAIT_LIMIT_SECONDS):
        # the run then ends FAILED with this instead of CANCELLED.
        self.gave_up = ""
        self._executors: int | None = None  # the cluster application's, at the last beat
        self._failed_tasks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job.pk}", daemon=True)

    def __enter__(self) -> JobHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        interval = max(0.5, min(1.0, settings.WORKER_HEARTBEAT_SECONDS))
        beats = 0
        try:
            while not self._stop.wait(interval):
                beats += 1
                updates: dict[str, Any] = {}
                if beats * interval >= settings.WORKER_HEARTBEAT_SECONDS:
                    beats = 0
                    # The tails are masked: the log page shows them while the job runs.
                    progress = self.stage_progress()
                    self.spark_events(progress)  # before the log's tails are read
                    waiting = self.waiting()
                    if spark := self.record.to_dict():
                        progress = {**progress, SPARK_KEY: spark}
                    updates = {"lease_until": lease_until(), "progress": progress, **self.log.fields()}
                    updates.update(waiting)
                    self.raise_wait_alert()
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
            connection.close()  # this thread's own connection

    def attach(self, spark: Any, *, submitted: bool = False) -> None:
        """The job's SparkSession is there: which application runs the job, for its page."""
        self.spark = spark
        context = spark.sparkContext
        executors = None
        if not str(context.master).startswith("local"):
            from portal.orchestration.worker.sparkctx import executor_count  # imports pyspark

            try:
                executors = self._executors = executor_count(spark)
            except Exception:  # the page lacks a count; the job must not fail for it
                logger.debug("could not count the Spark executors", exc_info=True)
        if submitted:  # the job's own application is the cluster's; this session only commits
            self.record.started("", "", None, submitted=True)
            return
        self.record.started(
            joblogs.mask(str(context.applicationId), self.log.secrets),
            joblogs.mask(str(context.master), self.log.secrets),
            executors,
            submitted=False,
        )

    def event(self, kind: str, message: str, level: str = "INFO", **figures: int) -> None:
        """One thing Spark did to the job: a line of its log and an entry of its page."""
        self.log.write(message, level)
        self.record.add(kind, joblogs.mask(message, self.log.secrets), **figures)

    def spark_events(self, progress: dict[str, Any]) -> None:
        """What Spark did to the job that its log would not say: executors of a cluster
        application lost or regained, task attempts that failed and are retried."""
        failed = int(progress.get("tasks_failed") or 0)
        if failed > self._failed_tasks:
            self.event(
                TASKS_FAILED,
                f"{failed - self._failed_tasks} Spark task attempt(s) failed; Spark runs them again "
                f"(up to spark.task.maxFailures); {failed} so far",
                "WARN",
                failed=failed - self._failed_tasks,
                failed_so_far=failed,
            )
            self._failed_tasks = failed
        if self.spark is None or str(self.spark.sparkContext.master).startswith("local"):
            return
        from portal.orchestration.worker.sparkctx import executor_count  # imports pyspark

        try:
            count = executor_count(self.spark)
            application = self.spark.sparkContext.applicationId
        except Exception:  # a stopping session: nothing to say
            return
        self.executors_seen(str(application), count)

    def executors_seen(self, application: str, count: int) -> None:
        """The cluster application holds `count` executors now: a change since the last beat is
        an event of the job."""
        before, self._executors = self._executors, count
        self.record.seen(RUNNING if count else WAITING, count)
        if before is not None and count < before:
            self.event(
                EXECUTORS_LOST,
                f"Spark application {application} lost {before - count} "
                f"executor(s), {count} left: their tasks run again on the others",
                "WARN",
                lost=before - count,
                executors=count,
            )
        elif before is not None and count > before:
            self.event(
                EXECUTORS_ADDED,
                f"Spark application {application} has {count} executor(s)",
                added=count - before,
                executors=count,
            )

    def waiting(self) -> dict[str, str]:
        """The job's message while its Spark application has no executors to run it on (a job
        waiting at 0 % with a silent log says why), cleared once they come."""
        if self.spark is None:
            return {}
        from portal.orchestration.worker.sparkctx import executor_shortage  # imports pyspark

        return self.shortage(executor_shortage())

    def shortage(self, shortage: str, now: float | None = None) -> dict[str, str]:
        """The job's message for `shortage` (sparkctx.executor_shortage: why the application has
        no executor, or ""), with what an operator can do; its start and its end are events of the
        job, its start an alert too (the next beat raises it). Past SPARK_EXECUTOR_WAIT_LIMIT_SECONDS
        of waiting the job is given up: cancelled in Spark, and it ends FAILED saying why."""
        now = time.monotonic() if now is None else now
        if shortage:
            limit = settings.SPARK_EXECUTOR_WAIT_LIMIT_SECONDS
            if not self._waiting:
                self.event(
                    NO_EXECUTORS,
                    f"{shortage} (Spark's driver log calls it: Initial job has not accepted any resources)",
                    "WARN",
                )
                self.record.seen(WAITING, 0)
                self._waiting_since = now
                self._wait_alert = (
                    f"Job {self.job.job_name} waits for Spark executors: {shortage} {OPERATOR_OPTIONS}"
                )
            self._waiting = True
            if limit and now - self._waiting_since >= limit and not self.gave_up:
                self.gave_up = (
                    f"Given up after waiting {limit} s for Spark executors (SPARK_EXECUTOR_WAIT_LIMIT_SECONDS): "
                    f"{shortage} Nothing was published. {OPERATOR_OPTIONS}"
                )
                self.log.write(self.gave_up, "ERROR")
                self.cancel.set()
            deadline = (
                f" The job is given up {limit} s after it began to wait (SPARK_EXECUTOR_WAIT_LIMIT_SECONDS)."
                if limit
                else ""
            )
            return {"message": f"Waiting for Spark executors: {shortage} {OPERATOR_OPTIONS}{deadline}"[:4000]}
        if self._waiting:
            self._waiting = False
            self.event(EXECUTORS_BACK, "Spark executors came: the job's tasks run")
            return {"message": ""}
        return {}

    def raise_wait_alert(self) -> None:
        """The event of a job that began to wait for executors (once per attempt): the dashboard
        lists it and the operator's sinks forward it."""
        if not self._wait_alert:
            return
        message, self._wait_alert = self._wait_alert, ""
        execution = self.job.execution
        raise_event(
            WAITING_EVENT,
            joblogs.mask(message, self.log.secrets),
            dedupe_key=f"{WAITING_EVENT}:{self.job.pk}:{self.attempt}",
            flow_group=execution.flow_group,
            flow_name=execution.flow_name,
            execution_id=execution.execution_id,
            job_name=self.job.job_name,
        )

    def progress(self) -> dict[str, Any]:
        """The job's Spark progress in this process ({} when it runs elsewhere or is not known),
        with what the job's page shows of its Spark application under SPARK_KEY."""
        found = self.stage_progress()
        spark = self.record.to_dict()
        return {**found, SPARK_KEY: spark} if spark else found

    def stage_progress(self) -> dict[str, Any]:
        if self.spark is None:
            return {}
        try:
            # Imported here: progress imports pyspark, which processes that never run Spark skip.
            from portal.pipeline.progress import job_progress
        except ImportError:
            return {}
        try:
            found = job_progress(self.spark, self.job.job_name, self.job.execution.execution_id)
        except Exception:  # progress is best effort; the job must not fail for it
            logger.debug("no progress for %s", self.job, exc_info=True)
            return {}
        # Work units are named after their datasets, which the API and pages show to every user:
        # masked like the log, should a decrypted secret ever name one.
        progress: dict[str, Any] = masked(found, self.log.secrets)
        return progress


def masked(value: Any, secrets: set[str]) -> Any:
    """`value` (JSON-like) with every secret in its strings masked."""
    if not secrets:
        return value
    if isinstance(value, str):
        return joblogs.mask(value, secrets)
    if isinstance(value, dict):
        return {key: masked(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [masked(item, secrets) for item in value]
    return value
