"""Create the SparkSession the pipeline runs on.

One helper so the worker, the CLI, the tests and the benchmark all get the same settings: the JDBC
drivers of every dialect (:mod:`portal.pipeline.dialects`) and Flowport's own jar (the one-pass
fork's file format, when built) on the classpath, the FAIR scheduler (tasks and fork branches run as
concurrent Spark jobs from threads and should share the cores), UTC as session time zone (so
timestamp watermarks mean the same thing everywhere), standard Parquet timestamps (microseconds,
UTC-adjusted; not INT96), and for ``local`` masters a small shuffle partition count (the default 200
only adds overhead) and this process's own Python for the Python workers, so a UDF in a custom
source or converter imports what the driver imports (Spark's default, ``python3`` on PATH, lacks the
virtualenv), forked from a daemon that has imported the Arrow reader's
modules already (:mod:`portal.pipeline.pydaemon`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from portal.pipeline import dialects, onepass

REPO_ROOT = Path(__file__).resolve().parents[2]


def _on_python_path(folder: str) -> None:
    """Spark's Python workers inherit PYTHONPATH: let them import ``portal`` wherever the driver runs."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if folder not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([*paths, folder])


def spark_jars(configured: str | None = None) -> list[str]:
    """The dialects' JDBC drivers and Flowport's jar (those that exist), then the jars an executor's Spark
    configuration lists: an executor adding a jar does not drop Flowport's."""
    ours = [*dialects.driver_jars(), onepass.jar_path()]
    listed = [jar.strip() for jar in (configured or "").split(",")]
    return list(dict.fromkeys(j for j in [*ours, *listed] if j and (j in listed or os.path.exists(j))))


def get_or_create_spark(
    master: str,
    app_name: str,
    conf: dict[str, Any] | None = None,
    log_level: str | None = os.environ.get("SPARK_LOG_LEVEL", "WARN"),
) -> SparkSession:
    """Return the active session or build one; ``conf`` entries override the defaults below. An empty
    ``master`` keeps the one spark-submit set; ``log_level=None`` leaves the levels to the log4j2
    configuration the driver was started with."""
    settings: dict[str, Any] = {
        "spark.scheduler.mode": "FAIR",
        "spark.sql.session.timeZone": "UTC",
        # Standard Parquet timestamps (INT64 microseconds, isAdjustedToUTC) instead of legacy INT96,
        # so pyarrow, DuckDB or Trino read the instants with their UTC marker.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.ui.showConsoleProgress": "false",
    }
    if master.startswith("local"):
        settings["spark.sql.shuffle.partitions"] = "4"
        settings["spark.default.parallelism"] = str(os.cpu_count() or 2)
        # PySpark takes the workers' Python from this variable when the SparkContext starts.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # Python workers forked warm (portal/pipeline/pydaemon.py), from this checkout.
        settings["spark.python.daemon.module"] = "portal.pipeline.pydaemon"
        _on_python_path(str(REPO_ROOT))
    settings.update(conf or {})
    if master:  # under spark-submit (empty master) its --jars are the ones that reach the cluster
        settings["spark.jars"] = ",".join(spark_jars(settings.get("spark.jars")))
    builder = SparkSession.builder.appName(app_name)
    if master:  # empty: the master spark-submit configured
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    if log_level:
        spark.sparkContext.setLogLevel(log_level)
    return spark


def warm_up(spark: SparkSession) -> float:
    """Start the session's Python worker pool now — one worker per core, forked from the daemon that
    imported the Arrow reader's modules (:mod:`portal.pipeline.pydaemon`) — so that a worker's first
    job pays neither; returns the seconds it took.  Nothing to warm where PySpark's Arrow support
    (pyarrow, pandas) is not installed."""
    started = time.monotonic()
    try:
        parts = spark.sparkContext.defaultParallelism
        spark.range(0, parts, 1, parts).mapInArrow(_same, "id long").count()
    except ImportError:
        pass
    return time.monotonic() - started


def _same(batches: Iterator[Any]) -> Iterator[Any]:
    yield from batches
