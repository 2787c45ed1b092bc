"""Test helpers: build JobSpecs, publish like the orchestrator would, read outputs back with Spark."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from portal.pipeline import run_job
from portal.pipeline.destinations.commit_steps import CommitSequence
from portal.pipeline.destinations.commitplan import cleanup_task_output, plan_commit


def spec(
    work: Path,
    props: dict[str, str],
    execution_id: int = 1,
    watermarks: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "job_name": extra.pop("job_name", "job"),
        "flow_group": "tests",
        "flow_name": "pipeline",
        "execution_id": execution_id,
        "properties": props,
        "previous_watermarks": dict(watermarks or {}),
        "work_dir": str(work / "work"),
        **extra,
    }


def publish(
    jobspec: dict[str, Any], states: list[dict[str, Any]], watermarks: dict[str, str]
) -> dict[str, Any]:
    """Run the commit plan like the orchestration layer: data steps, then the watermark step.

    Returns the plan; ``watermarks`` (the test's state store) is updated in place.
    """
    plan = plan_commit(jobspec, states)
    for urn, steps in plan.items():
        data_steps = [s for s in steps if s["type"] != "high_watermark"]
        CommitSequence.from_dicts(data_steps, jobspec["properties"], urn).run()
        for step in steps:
            if step["type"] == "high_watermark":
                watermarks[urn] = step["value"]
    cleanup_task_output(jobspec)
    return plan


def run_and_publish(
    spark: SparkSession, jobspec: dict[str, Any], watermarks: dict[str, str]
) -> list[dict[str, Any]]:
    jobspec["previous_watermarks"] = dict(watermarks)
    states = run_job(spark, jobspec)
    json.dumps(states)  # TaskStates must be plain JSON
    publish(jobspec, states, watermarks)
    return states


def read(spark: SparkSession, path: Path | str, fmt: str = "parquet") -> DataFrame:
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    return reader.load(str(path))


def write_csv(path: Path, header: str, rows: list[str], mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([header, *rows]) + "\n")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def write_jsonl(path: Path, records: list[dict[str, Any]], mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def data_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))


NOW = time.time()
