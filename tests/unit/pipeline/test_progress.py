"""Live progress (``portal.pipeline.progress.job_progress``) polled while a real job runs in a thread."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.progress import job_group, job_progress
from portal.pipeline.sources.base import Extraction, Source
from portal.pipeline.workunits import WorkUnit

from .helpers import spec


class SlowSource(Source):
    """Two datasets of 24 rows in 6 Spark partitions; every row sleeps 40 ms in the JVM."""

    def get_work_units(self) -> list[WorkUnit]:
        return [WorkUnit(urn, None, "24", estimated_bytes=100) for urn in ("first", "second")]

    def extract(self, wu: WorkUnit) -> Extraction:
        df = self.spark.range(0, 24, numPartitions=6).selectExpr(
            "id", "java_method('java.lang.Thread', 'sleep', cast(40 as bigint)) AS slept"
        )
        return Extraction(df)


def test_unknown_job_reports_a_clear_empty_progress(spark: SparkSession) -> None:
    result = job_progress(spark, "never-ran", 424242)
    assert result["state"] == "UNKNOWN"
    assert result["fraction"] == 0.0
    assert result["work_units"] == []
    assert all(
        result[k] == 0 for k in ("jobs", "stages_total", "tasks_total", "tasks_done", "work_units_total")
    )


def test_progress_of_a_running_job_rises_to_one(spark: SparkSession, tmp_path: Path) -> None:
    props = {
        "source.class": f"{__name__}.SlowSource",
        "mr.job.max.mappers": "1",  # the two work units run one after the other
        "data.publisher.final.dir": str(tmp_path / "lake"),
    }
    job = spec(tmp_path, props, execution_id=31, job_name="progress_job")
    states: list[dict[str, Any]] = []
    runner = threading.Thread(target=lambda: states.extend(run_job(spark, job)))
    runner.start()
    snapshots: list[dict[str, Any]] = []
    while runner.is_alive():
        snapshots.append(job_progress(spark, "progress_job", 31))
        time.sleep(0.02)
    runner.join()
    final = job_progress(spark, "progress_job", 31)

    assert [s["status"] for s in states] == ["SUCCEEDED", "SUCCEEDED"]
    running = [s for s in snapshots if s["state"] == "RUNNING"]
    midway = [s for s in running if 0 < s["fraction"] < 1 and s["tasks_total"] > 0]
    assert midway, snapshots[-3:]
    # While the first work unit runs, the second is still PENDING (one task thread).
    assert any(
        [u["status"] for u in s["work_units"]].count("PENDING") == 1 and s["work_units_running"] == 1
        for s in running
    )
    assert any(u["tasks_done"] > 0 for s in running for u in s["work_units"] if u["status"] == "RUNNING")
    fractions = [s["fraction"] for s in snapshots if s["state"] != "UNKNOWN"]
    assert fractions == sorted(fractions)  # a progress bar never goes backwards

    assert final["state"] == "FINISHED" and final["fraction"] == 1.0
    assert final["work_units_total"] == final["work_units_done"] == 2
    assert final["tasks_total"] == final["tasks_done"] >= 12 and final["tasks_failed"] == 0
    assert final["stages_completed"] == final["stages_total"] >= 2
    assert {u["dataset_urn"]: u["status"] for u in final["work_units"]} == {
        "first": "SUCCEEDED",
        "second": "SUCCEEDED",
    }
    # The TaskState's own stage_progress reads the same job group.
    task_id = states[0]["task_id"]
    assert job_group("progress_job", 31, task_id) == f"flowport:progress_job:31:{task_id}"
    assert states[0]["stage_progress"]["tasks_completed"] == states[0]["stage_progress"]["tasks_total"] >= 6


def test_a_killed_job_keeps_the_share_it_reached(spark: SparkSession, tmp_path: Path) -> None:
    """Killed during its first work unit: the bar stops where the work stopped, never at 100 %."""
    props = {
        "source.class": f"{__name__}.SlowSource",
        "mr.job.max.mappers": "1",
        "data.publisher.final.dir": str(tmp_path / "lake"),
    }
    job = spec(tmp_path, props, execution_id=32, job_name="killed_job")
    cancel = threading.Event()
    states: list[dict[str, Any]] = []
    runner = threading.Thread(target=lambda: states.extend(run_job(spark, job, cancel_event=cancel)))
    runner.start()
    while runner.is_alive() and not any(
        u["tasks_done"] > 0 for u in job_progress(spark, "killed_job", 32)["work_units"]
    ):
        time.sleep(0.02)
    cancel.set()
    runner.join()
    final = job_progress(spark, "killed_job", 32)

    assert "SUCCEEDED" not in [s["status"] for s in states]
    assert final["state"] == "FINISHED"
    assert 0 < final["fraction"] < 1, final["fraction"]
    assert all(u["fraction"] < 1 for u in final["work_units"])
