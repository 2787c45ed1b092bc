"""The heartbeat of a running job: while the job runs it extends the job's
lease (a worker that dies stops extending it and the orchestrator redelivers
the job), records Spark stage progress and the records counted so far, and
notices a kill request."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from portal.orchestration import joblogs
from portal.orchestration.models import JobExecution, JobStatus

logger = logging.getLogger(__name__)


def lease_until() -> datetime:
    """The end of a lease taken or extended now."""
    return timezone.now() + timedelta(seconds=settings.WORKER_LEASE_SECONDS)


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
        interval = max(0.5, min(1.0, settings.WORKER_HEARTBEAT_SECONDS))
        beats = 0
        try:
            while not self._stop.wait(interval):
                beats += 1
                updates: dict[str, Any] = {}
                if beats * interval >= settings.WORKER_HEARTBEAT_SECONDS:
                    beats = 0
                    # The tails are masked: the log page shows them while the job runs.
                    updates = {"lease_until": lease_until(), "progress": self.progress(), **self.log.fields()}
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
