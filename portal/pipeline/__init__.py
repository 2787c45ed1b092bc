"""Flowport's data plane: the PySpark ingestion runtime (Gobblin's task flow on Spark).

Imports nothing from Django or Celery, so it ships to any Spark cluster and runs alone::

    python -m portal.pipeline run jobspec.json      # prints the TaskStates as JSON

Public contract:

* :func:`run_job` ``(spark, jobspec) -> list[dict]`` — TaskState dicts (:mod:`.taskstate`).
* :class:`~portal.pipeline.jobspec.JobSpec` — the plain-JSON input (:mod:`.jobspec`).
* :func:`portal.pipeline.destinations.commitplan.plan_commit` — commit steps per dataset URN.
* :mod:`portal.pipeline.destinations.commit_steps` — ``CommitStep``, ``FsRenameCommitStep``,
  ``JdbcPublishCommitStep``, ``CommitSequence``; :mod:`portal.pipeline.destinations.iceberg` —
  ``IcebergCommitStep`` (an Iceberg destination's one commit) and ``committed_watermarks``.
* :func:`portal.pipeline.spark.session.get_or_create_spark` — the SparkSession with Flowport's settings.
* :func:`portal.pipeline.progress.job_progress` ``(spark, job_name, execution_id) -> dict`` — live
  progress of a running job, for the worker's heartbeat.

Sources are :mod:`portal.pipeline.sources`, destinations (writers, commit steps, the commit plan)
:mod:`portal.pipeline.destinations`, one module per kind. See docs/pipeline.md for property keys,
the fork key rule and commit policies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from portal.pipeline.jobspec import JobSpec


def run_job(
    spark: SparkSession,
    jobspec: dict[str, Any] | JobSpec,
    *,
    cancel_event: threading.Event | None = None,
    on_task_state: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run a job; see :func:`portal.pipeline.runner.run_job` (imported lazily to keep this light)."""
    from portal.pipeline.runner import run_job as _run_job

    return _run_job(spark, jobspec, cancel_event=cancel_event, on_task_state=on_task_state)


__all__ = ["run_job"]
