"""``run_job``: plan WorkUnits with the Source, pack them, run them as tasks, return TaskStates.

Contract: ``run_job(spark, jobspec) -> list[dict]`` — one TaskState dict per WorkUnit (see
:mod:`portal.pipeline.taskstate`), in task order.  It never raises for a job-level problem either:
an unloadable source or a planning error comes back as one FAILED TaskState
(``task_id`` ending in ``_planning``) so the caller has a single shape to handle.  It reads and
writes only the source, the work dir and the writers' staging/output locations; publishing is the
caller's job, through :func:`portal.pipeline.destinations.commitplan.plan_commit`.

Optional keyword arguments: ``cancel_event`` (a ``threading.Event``; set it to cancel — running
Spark jobs are cancelled, unstarted work units come back CANCELLED) and ``on_task_state`` (called
with each TaskState dict as soon as its task ends, for live status).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark.sql import SparkSession

from portal.pipeline import progress
from portal.pipeline.classloading import load_class
from portal.pipeline.errors import PipelineError
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.properties import Properties
from portal.pipeline.sources.base import Source, SourceContext
from portal.pipeline.task import JobContext, TaskRunner, describe_exception
from portal.pipeline.taskstate import CANCELLED, SUCCEEDED, TaskState
from portal.pipeline.workunits import MultiWorkUnit, WorkUnit, pack

log = logging.getLogger(__name__)


CANCELLED_WHILE_PLANNING = (
    "job cancelled while planning (reading the source's sizes and watermarks); "
    "its statements were cancelled on the server and no work unit ran"
)


def _planning_failure(
    spec: JobSpec, props: Properties, message: str, *, status: str | None = None
) -> dict[str, Any]:
    urn = props.get("dataset.urn") or spec.job_name
    low = spec.previous_watermarks.get(urn)
    state = TaskState(
        task_id=f"task_{spec.job_name}_{spec.execution_id}_planning",
        job_name=spec.job_name,
        execution_id=spec.execution_id,
        dataset_urn=urn,
        low_watermark=low,
        expected_high_watermark=low,
        actual_high_watermark=low,
    )
    state.fail(message)
    if status is not None:
        state.status = status
    return state.to_dict()


def make_source(spark: SparkSession, spec: JobSpec, props: Properties, work_dir: str) -> Source:
    source_cls: type[Source] = load_class(props.require("source.class"), "source.class", Source)
    return source_cls(SourceContext(spark, spec, props.pre_fork(), work_dir))


def plan_work_units(spec: JobSpec, source: Source) -> list[WorkUnit]:
    units = source.get_work_units()
    if spec.is_backfill:
        units = _backfill_units(spec, units)
    for index, wu in enumerate(units):
        wu.task_id = f"task_{spec.job_name}_{spec.execution_id}_{index}"
    return units


def _backfill_units(spec: JobSpec, units: list[WorkUnit]) -> list[WorkUnit]:
    """A backfill runs only the datasets it lists; a listed dataset the source did not plan fails."""
    kept = [wu for wu in units if wu.dataset_urn in spec.backfill]
    planned = {wu.dataset_urn for wu in kept}
    for urn, bounds in spec.backfill.items():
        if urn not in planned:
            message = (
                f"backfill ['{urn}']: the source has no dataset '{urn}' "
                "(it is not among the tables/folders this job reads)"
            )
            kept.append(WorkUnit(urn, bounds.get("low"), None, error=message))
    return kept


def run_job(
    spark: SparkSession,
    jobspec: dict[str, Any] | JobSpec,
    *,
    cancel_event: threading.Event | None = None,
    on_task_state: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every WorkUnit of the job and return the TaskState dicts (see the module docstring)."""
    try:
        spec = JobSpec.from_dict(jobspec)
    except PipelineError as exc:
        name = jobspec.get("job_name", "job") if isinstance(jobspec, dict) else "job"
        return [_planning_failure(JobSpec(job_name=str(name) or "job"), Properties({}), str(exc))]
    progress.execution_started(spec.job_name, spec.execution_id)
    try:
        return _run(spark, spec, cancel_event, on_task_state)
    finally:
        progress.execution_finished(spec.job_name, spec.execution_id)


def _run(
    spark: SparkSession,
    spec: JobSpec,
    cancel_event: threading.Event | None,
    on_task_state: Callable[[dict[str, Any]], None] | None,
) -> list[dict[str, Any]]:
    props = spec.props
    work_dir = spec.job_work_dir
    try:
        if not work_dir:
            raise PipelineError("jobspec field 'work_dir' (or property job.work.dir) is required")
        source = make_source(spark, spec, props, work_dir)
    except Exception as exc:
        return [_planning_failure(spec, props, describe_exception(exc, props))]
    job = JobContext(spark, spec, props, source, work_dir, cancel_event or threading.Event())
    watcher = _CancelWatcher(job) if cancel_event is not None else None
    try:
        return _plan_and_run(job, on_task_state)
    finally:
        if watcher:
            watcher.stop()


def _plan_and_run(
    job: JobContext, on_task_state: Callable[[dict[str, Any]], None] | None
) -> list[dict[str, Any]]:
    spark, spec, props = job.spark, job.jobspec, job.props
    try:
        units = plan_work_units(spec, job.source)
    except Exception as exc:
        if job.cancel_event.is_set():
            return [_planning_failure(spec, props, CANCELLED_WHILE_PLANNING, status=CANCELLED)]
        return [_planning_failure(spec, props, describe_exception(exc, props))]
    if not units:
        return []
    progress.execution_planned(spec.job_name, spec.execution_id, [(u.task_id, u.dataset_urn) for u in units])
    max_groups = props.get_int("mr.job.max.mappers") or spark.sparkContext.defaultParallelism
    groups = pack(units, max_groups, prefix=f"mwu_{spec.job_name}_{spec.execution_id}")
    results: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()

    def report(state: dict[str, Any]) -> None:
        with lock:
            results[state["task_id"]] = state
        if on_task_state is not None:
            on_task_state(state)

    def run_group(group: MultiWorkUnit) -> None:
        failed_datasets: set[str] = set()
        for index, wu in enumerate(group.work_units):
            info = {
                "id": group.id,
                "index": index,
                "size": len(group.work_units),
                "estimated_bytes": group.estimated_bytes,
                "groups": len(groups),
            }
            if wu.dataset_urn in failed_datasets:
                state = TaskRunner(job, wu, info).state
                state.status = CANCELLED
                state.error = "not run: an earlier range of this dataset failed in the same task"
                progress.task_status(spec.job_name, spec.execution_id, wu.task_id, CANCELLED)
                report(state.to_dict())
                continue
            state = TaskRunner(job, wu, info).run()
            if state.status != SUCCEEDED:
                failed_datasets.add(wu.dataset_urn)
            report(state.to_dict())

    with ThreadPoolExecutor(max_workers=len(groups), thread_name_prefix="task") as pool:
        list(pool.map(run_group, groups))
    order = {wu.task_id: i for i, wu in enumerate(units)}
    return [results[k] for k in sorted(results, key=order.__getitem__)]


class _CancelWatcher:
    """From planning to the last work unit: as soon as the cancel event is set, cancels the job's
    running Spark jobs (by job group) and the statements its source still runs on its server
    (:mod:`portal.pipeline.cancelling`), and again every half second while the job goes on (a
    statement started meanwhile)."""

    def __init__(self, job: JobContext) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(job,), daemon=True)
        self._thread.start()

    def _watch(self, job: JobContext) -> None:
        while not self._stop.is_set():
            if job.cancel_event.wait(0.2):
                for group in sorted(job.active_groups):
                    job.spark.sparkContext.cancelJobGroup(group)
                try:
                    job.source.cancel_statements()
                except Exception:  # the server may be gone too: the job ends when its read does
                    log.warning("could not cancel the source's statements", exc_info=True)
                self._stop.wait(0.5)

    def stop(self) -> None:
        self._stop.set()
