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
modules already (:mod:`portal.pipeline.spark.pydaemon`).

Spark's web UI has no login of its own and shows every job of the session, its SQL and its
environment, and Spark binds it to every interface unless ``SPARK_LOCAL_IP`` names one (Spark 4 has
no configuration key for the UI's address; ``spark.driver.bindAddress`` moves the driver's RPC, not
the UI). So the UI is off unless an operator sets ``SPARK_UI_ENABLED=true``, and when it runs in a
driver this module starts, it listens where the portal does: ``SPARK_UI_HOST``, else the host of
``FLOWPORT_BIND`` (the web process's address), else loopback. ``SPARK_LOCAL_IP``, when the operator
sets it, decides instead (Spark has one address for the driver and its UI).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from portal.pipeline import dialects

REPO_ROOT = Path(__file__).resolve().parents[3]
LOOPBACK = "127.0.0.1"
_TRUE = {"1", "true", "yes", "on"}


# Flowport's own jar (portal/pipeline/jvm: the one-pass fork's file format, pipeline.onepass).
DEFAULT_JAR = Path(__file__).resolve().parents[1] / "jvm" / "flowport-pipeline.jar"


def jar_path() -> str | None:
    """Flowport's jar for ``spark.jars`` (``FLOWPORT_PIPELINE_JAR`` overrides), if it exists."""
    path = os.environ.get("FLOWPORT_PIPELINE_JAR") or str(DEFAULT_JAR)
    return path if os.path.exists(path) else None


def ui_enabled() -> bool:
    """Does an operator want Spark's web UI (``SPARK_UI_ENABLED``; off by default)?"""
    return os.environ.get("SPARK_UI_ENABLED", "").strip().lower() in _TRUE


def bind_host(bind: str) -> str:
    """The host part of a gunicorn ``--bind`` address (``host:port``, ``[v6]:port``); loopback for a
    Unix socket, a file descriptor or no host."""
    bind = bind.strip()
    if not bind or bind.startswith(("unix:", "fd://")):
        return LOOPBACK
    if bind.startswith("["):
        return bind[1 : bind.find("]")] or LOOPBACK
    host = bind.rsplit(":", 1)[0] if ":" in bind else bind
    return LOOPBACK if not host or host.isdigit() else host


def ui_host() -> str:
    """Where a driver's web UI listens: ``SPARK_UI_HOST``, else where the portal listens."""
    return os.environ.get("SPARK_UI_HOST", "").strip() or bind_host(os.environ.get("FLOWPORT_BIND", ""))


@contextlib.contextmanager
def _jvm_environment(values: dict[str, str]) -> Iterator[None]:
    """Variables for the driver JVM PySpark launches now (it copies this process's environment),
    left out of the environment of whatever this process starts later."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _on_python_path(folder: str) -> None:
    """Spark's Python workers inherit PYTHONPATH: let them import ``portal`` wherever the driver runs."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if folder not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([*paths, folder])


def spark_jars(configured: str | None = None) -> list[str]:
    """The dialects' JDBC drivers and Flowport's jar (those that exist), then the jars an executor's Spark
    configuration lists: an executor adding a jar does not drop Flowport's."""
    ours = [*dialects.driver_jars(), jar_path()]
    listed = [jar.strip() for jar in (configured or "").split(",")]
    return list(dict.fromkeys(j for j in [*ours, *listed] if j and (j in listed or os.path.exists(j))))


def driver_host_settings(master: str) -> dict[str, str]:
    """Where a cluster's executors reach this driver: ``SPARK_LOCAL_IP`` when the operator set it.
    Spark would advertise the name it makes of that address instead, which on many hosts is
    ``localhost`` (the host's name resolving to a loopback address in /etc/hosts), unreachable
    from any other machine. An executor's own ``spark.driver.host`` overrides this."""
    local_ip = os.environ.get("SPARK_LOCAL_IP", "").strip()
    if not master or master.startswith("local") or not local_ip:
        return {}
    return {"spark.driver.host": local_ip}


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
        # A value read as it left: Spark would pad a JDBC CHAR(n) (a MariaDB SET or ENUM among
        # them) with spaces the server did not send ('' arrived as '   ').
        "spark.sql.readSideCharPadding": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "true" if ui_enabled() else "false",
    }
    if master.startswith("local"):
        # Nothing outside this process talks to a local driver: its RPC and block manager ports
        # stay on loopback instead of the machine's address.
        settings["spark.driver.bindAddress"] = LOOPBACK
        settings["spark.driver.host"] = LOOPBACK
        settings["spark.sql.shuffle.partitions"] = "4"
        settings["spark.default.parallelism"] = str(os.cpu_count() or 2)
        # PySpark takes the workers' Python from this variable when the SparkContext starts.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # Python workers forked warm (portal/pipeline/spark/pydaemon.py), from this checkout.
        settings["spark.python.daemon.module"] = "portal.pipeline.spark.pydaemon"
        _on_python_path(str(REPO_ROOT))
    settings.update(driver_host_settings(master))
    settings.update(conf or {})
    if master:  # under spark-submit (empty master) its --jars are the ones that reach the cluster
        settings["spark.jars"] = ",".join(spark_jars(settings.get("spark.jars")))
    builder = SparkSession.builder.appName(app_name)
    if master:  # empty: the master spark-submit configured
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    ui = str(settings["spark.ui.enabled"]).strip().lower() == "true"
    with _jvm_environment({"SPARK_LOCAL_IP": ui_host()} if ui and "SPARK_LOCAL_IP" not in os.environ else {}):
        spark = builder.getOrCreate()
    if log_level:
        spark.sparkContext.setLogLevel(log_level)
    return spark


def warm_up(spark: SparkSession) -> float:
    """Start the session's Python worker pool now — one worker per core, forked from the daemon that
    imported the Arrow reader's modules (:mod:`portal.pipeline.spark.pydaemon`) — so that a worker's first
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
