"""Live progress of a running job, for the worker's heartbeat and the dashboard's progress bars.

``job_progress(spark, job_name, execution_id) -> dict`` is cheap (a few status-tracker calls per
*running* work unit; finished Spark jobs are read once and remembered) and thread-safe: call it
from a heartbeat thread while ``run_job`` runs in another thread of the same process (a
SparkContext belongs to one driver process, so that is where the job's Spark state lives).

Every Spark job the pipeline starts for a work unit runs in the job group
:func:`job_group` ``(job_name, execution_id, task_id)`` = ``flowport:<job>:<execution>:<task_id>``,
and task ids are ``task_<job>_<execution>_<index>``; ``run_job`` registers the execution and its
planned work units here, so progress also counts the work units that have not started yet.

The result (all counts are ints)::

    {"job_name", "execution_id",
     "state": "UNKNOWN" | "PLANNING" | "RUNNING" | "FINISHED",
     "fraction": 0.0 .. 1.0,                 # work units done + running ones' share, never decreasing
     "work_units_total", "work_units_done", "work_units_running",
     "jobs", "stages_total", "stages_completed", "tasks_total", "tasks_done", "tasks_failed",
     "work_units": [{"task_id", "dataset_urn", "status", "fraction", "jobs", "stages_total",
                     "stages_completed", "tasks_total", "tasks_done", "tasks_failed"}, ...]}

``state`` is ``UNKNOWN`` (and every number 0, ``work_units`` empty) for a job this process has not
run or no longer remembers (the last 64 executions are kept).  A running work unit's fraction is its
Spark tasks done / total so far, capped at 0.95 (Spark jobs of later steps are not known yet); a
finished one counts 1.0 whatever its status.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from portal.pipeline.taskstate import SUCCEEDED

PENDING = "PENDING"
RUNNING = "RUNNING"
KEEP_EXECUTIONS = 64
RUNNING_CAP = 0.95
_COUNTS = ("jobs", "stages_total", "stages_completed", "tasks_total", "tasks_done", "tasks_failed")


def job_group(job_name: str, execution_id: int, task_id: str) -> str:
    """The Spark job group of one work unit's Spark jobs."""
    return f"flowport:{job_name}:{execution_id}:{task_id}"


def _zero() -> dict[str, int]:
    return dict.fromkeys(_COUNTS, 0)


@dataclass
class _Unit:
    task_id: str
    dataset_urn: str
    group: str
    status: str = PENDING
    fraction: float = 0.0
    done_jobs: dict[int, dict[str, int]] = field(default_factory=dict)  # finished Spark jobs, cached


@dataclass
class _Execution:
    state: str = "PLANNING"
    units: dict[str, _Unit] = field(default_factory=dict)


_lock = threading.Lock()
_executions: OrderedDict[tuple[str, int], _Execution] = OrderedDict()


# -- registration (called by the runner and the task runner) -------------------------------------------


def execution_started(job_name: str, execution_id: int) -> None:
    with _lock:
        _executions[(job_name, execution_id)] = _Execution()
        _executions.move_to_end((job_name, execution_id))
        while len(_executions) > KEEP_EXECUTIONS:
            _executions.popitem(last=False)


def execution_planned(job_name: str, execution_id: int, units: Iterable[tuple[str, str]]) -> None:
    """``units``: ``(task_id, dataset_urn)`` of every planned work unit."""
    with _lock:
        execution = _executions.get((job_name, execution_id))
        if execution is None:
            return
        execution.state = RUNNING
        for task_id, urn in units:
            execution.units[task_id] = _Unit(task_id, urn, job_group(job_name, execution_id, task_id))


def task_status(job_name: str, execution_id: int, task_id: str, status: str) -> None:
    with _lock:
        execution = _executions.get((job_name, execution_id))
        unit = execution.units.get(task_id) if execution else None
        if unit is not None:
            unit.status = status
            # Only work done counts as done: a cancelled or failed unit keeps the
            # share it reached, so a killed job never shows a full bar.
            if status == SUCCEEDED:
                unit.fraction = 1.0


def execution_finished(job_name: str, execution_id: int) -> None:
    with _lock:
        execution = _executions.get((job_name, execution_id))
        if execution is not None:
            execution.state = "FINISHED"


# -- reading Spark's status tracker --------------------------------------------------------------------


def _job_counts(spark: SparkSession, job_id: int) -> tuple[dict[str, int], bool]:
    """Counts of one Spark job and whether it is finished (its counts will not change)."""
    tracker = spark.sparkContext.statusTracker()
    counts = _zero()
    info = tracker.getJobInfo(job_id)
    if info is None:
        return counts, False
    counts["jobs"] = 1
    finished = info.status in ("SUCCEEDED", "FAILED")
    for stage_id in info.stageIds:
        stage = tracker.getStageInfo(stage_id)
        if stage is None:
            continue
        counts["stages_total"] += 1
        counts["tasks_total"] += stage.numTasks
        counts["tasks_failed"] += stage.numFailedTasks
        if info.status == "SUCCEEDED":  # skipped stages of a succeeded job count as done
            counts["stages_completed"] += 1
            counts["tasks_done"] += stage.numTasks
        else:
            counts["tasks_done"] += stage.numCompletedTasks
            counts["stages_completed"] += int(stage.numCompletedTasks >= stage.numTasks > 0)
    return counts, finished


def group_progress(
    spark: SparkSession, group: str, cache: dict[int, dict[str, int]] | None = None
) -> dict[str, int]:
    """Spark jobs/stages/tasks of one job group, summed; ``cache`` keeps finished jobs' counts."""
    total = _zero()
    for job_id in spark.sparkContext.statusTracker().getJobIdsForGroup(group):
        if cache is not None and job_id in cache:
            counts = cache[job_id]
        else:
            counts, finished = _job_counts(spark, job_id)
            if finished and cache is not None:
                cache[job_id] = counts
        for key in _COUNTS:
            total[key] += counts[key]
    return total


def job_progress(spark: SparkSession, job_name: str, execution_id: int) -> dict[str, Any]:
    """Progress of one job execution in this process (see the module docstring for the keys)."""
    result: dict[str, Any] = {
        "job_name": job_name,
        "execution_id": execution_id,
        "state": "UNKNOWN",
        "fraction": 0.0,
        "work_units_total": 0,
        "work_units_done": 0,
        "work_units_running": 0,
        **_zero(),
        "work_units": [],
    }
    with _lock:
        execution = _executions.get((job_name, execution_id))
        if execution is None:
            return result
        state = execution.state
        units = [(u, u.status, dict(u.done_jobs)) for u in execution.units.values()]
    rows: list[dict[str, Any]] = []
    for unit, status, cache in units:
        counts = group_progress(spark, unit.group, cache) if status != PENDING else _zero()
        with _lock:
            unit.done_jobs.update(cache)
            if unit.status == RUNNING and counts["tasks_total"]:
                share = RUNNING_CAP * counts["tasks_done"] / counts["tasks_total"]
                unit.fraction = max(unit.fraction, share)
            fraction, status = unit.fraction, unit.status
        rows.append(
            {
                "task_id": unit.task_id,
                "dataset_urn": unit.dataset_urn,
                "status": status,
                "fraction": round(fraction, 4),
                **counts,
            }
        )
        for key in _COUNTS:
            result[key] += counts[key]
    result["state"] = state
    result["work_units"] = rows
    result["work_units_total"] = len(rows)
    result["work_units_done"] = sum(r["status"] not in (PENDING, RUNNING) for r in rows)
    result["work_units_running"] = sum(r["status"] == RUNNING for r in rows)
    if state == "FINISHED" and all(r["status"] == SUCCEEDED for r in rows):
        result["fraction"] = 1.0
    elif rows:
        result["fraction"] = round(sum(r["fraction"] for r in rows) / len(rows), 4)
    return result
