"""One long-lived SparkSession per worker process.

A fresh SparkSession costs seconds; a warm one lets a job start at once. A
SparkContext is per process and not fork-safe, so workers use the `threads`
(or `solo`) pool, and concurrent jobs run as Spark job groups under the FAIR
scheduler (the pipeline sets them). A process holds one Spark master: an
executor on another master needs its own worker process.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from pyspark.sql import SparkSession

from portal.orchestration.worker.quota_spark import PoolShape
from portal.orchestration.worker.submit import portal_zip
from portal.pipeline.logtag import tag_thread
from portal.pipeline.spark.session import get_or_create_spark

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_session: SparkSession | None = None
_master: str | None = None
_started: float = 0.0  # time.monotonic() when the session started
_pool_lock = threading.Lock()  # two jobs of one owner starting at once add its pool once

# A standalone master gives an application every free core unless it says how many it wants, and
# holds them while it idles: a second worker's application then gets none and its jobs wait for
# ever. So a worker's application asks for this much, unless its executor's Spark settings (the
# topology) say otherwise; two such workers fit a four-core cluster.
CLUSTER_SIZING = {"spark.cores.max": "2", "spark.executor.cores": "1", "spark.executor.memory": "1g"}
NO_EXECUTORS = "has no Spark executors"


LOG4J2_CONFIG = Path(__file__).with_name("spark-log4j2.xml")
_LEVELS = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"]


class SparkMasterMismatch(RuntimeError):
    pass


def driver_log_options(conf: dict[str, Any] | None = None) -> dict[str, str]:
    """The driver JVM's options that split its log per job (spark-log4j2.xml):
    the console keeps SPARK_LOG_LEVEL, each job's driver log gets
    SPARK_DRIVER_LOG_LEVEL. Appended to any extraJavaOptions the executor's
    spark_conf sets."""
    console = settings.SPARK_LOG_LEVEL.upper()
    driver = settings.SPARK_DRIVER_LOG_LEVEL.upper()
    root = min(console, driver, key=_LEVELS.index)
    options = " ".join(
        [
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}",
            f'"-Dflowport.log.dir={Path(settings.FLOWPORT_LOG_DIR).resolve()}"',  # a path may hold spaces
            f"-Dflowport.spark.console.level={console}",
            f"-Dflowport.spark.driver.level={driver}",
            f"-Dflowport.spark.root.level={root}",
        ]
    )
    given = (conf or {}).get("spark.driver.extraJavaOptions")
    return {"spark.driver.extraJavaOptions": f"{given} {options}" if given else options}


def cluster_conf(master: str, conf: dict[str, Any] | None = None) -> dict[str, Any]:
    """The session's settings for `master`: on a standalone cluster, the executor's own sizing
    (`CLUSTER_SIZING` where its Spark settings in the topology set none)."""
    merged = dict(conf or {})
    if master.startswith("spark://"):
        for key, value in CLUSTER_SIZING.items():
            merged.setdefault(key, value)
    return merged


def executor_python(conf: dict[str, Any]) -> str:
    """The interpreter a cluster's executors run Python tasks with. PySpark sends the driver's
    ``PYSPARK_PYTHON`` with every task, so it must name a Python with pyarrow and the pipeline's
    libraries on every Spark worker: this process's own, unless the executor's
    ``spark.pyspark.python`` or the environment names another — right as it is when the cluster
    runs on this host or the same path holds the same virtualenv on every Spark worker."""
    return str(conf.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON") or sys.executable)


def ship_code(spark: SparkSession) -> None:
    """The `portal` package, zipped as for spark-submit, on the executors' Python path: the Arrow
    reader, a custom source or a converter imports it there as in the driver."""
    spark.sparkContext.addPyFile(str(portal_zip()))


def session_for(master: str, conf: dict[str, Any] | None = None) -> SparkSession:
    """The process's session, created on first use; `conf` of later jobs
    only applies where Spark allows runtime changes (SQL settings)."""
    global _session, _master, _started
    with _lock:
        if _session is None:
            logger.info("starting SparkSession on %s", master)
            conf = cluster_conf(master, conf)
            if master.startswith("spark://"):  # read when the SparkContext starts
                os.environ["PYSPARK_PYTHON"] = executor_python(conf)
            _session = get_or_create_spark(
                master,
                f"flowport-worker@{socket.gethostname()}",
                {**conf, **driver_log_options(conf)},
                log_level=None,  # spark-log4j2.xml sets the levels
            )
            if master.startswith("spark://"):
                ship_code(_session)
            _master, _started = master, time.monotonic()
            return _session
        if master != _master:
            raise SparkMasterMismatch(
                f"this worker process runs Spark master {_master}; a job for {master} needs a worker "
                "process of its own (start one with -Q on that executor's queue)"
            )
        for key, value in (conf or {}).items():
            if key.startswith("spark.sql."):
                _session.conf.set(key, str(value))
        return _session


def stop() -> None:
    """Stop the process's session, if it started, before the process ends. The driver JVM then
    closes PySpark's accumulator connection in order; a JVM that dies first (its process group
    signalled) leaves PySpark's accumulator server printing an ``EOFError`` traceback."""
    global _session, _master
    with _lock:
        session, _session, _master = _session, None, None
    if session is not None:
        try:
            session.stop()
        except Exception:  # the JVM already gone: nothing left to stop
            logger.info("the SparkSession was already down at shutdown")


def fair_pool(spark: SparkSession, shape: PoolShape | None) -> str:
    """Make the FAIR pool `shape` (a quota_spark.PoolShape) in the session unless it exists, and
    return its name ("" for none). Spark reads pools' weight and minShare only from its allocation
    file at start-up, or from the pool object when one is added later, as here."""
    if shape is None:
        return ""
    with _pool_lock:
        context: Any = spark.sparkContext._jsc.sc()
        if not context.getPoolForName(shape.name).isDefined():
            scheduler: Any = spark.sparkContext._jvm.org.apache.spark.scheduler  # type: ignore[union-attr]
            pool = scheduler.Pool(shape.name, scheduler.SchedulingMode.FAIR(), shape.min_share, shape.weight)
            context.taskScheduler().rootPool().addSchedulable(pool)
    return str(shape.name)


def activator(spark: SparkSession, log_tag: str) -> Callable[[], None]:
    """A thread initializer that makes `spark` the active session of the
    calling thread (the fs layer finds Hadoop file systems through it) and
    tags its Spark work with the job (its driver log)."""

    def initializer() -> None:
        try:
            jvm: Any = spark._jvm
            jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
            tag_thread(spark, log_tag)
        except Exception:  # best effort: local paths do not need it
            logger.debug("could not set the active SparkSession", exc_info=True)

    return initializer


def executor_wait_seconds() -> float:
    """How long a cluster application may run without executors before the job and the executor's
    health say so: a standalone master launches them within seconds."""
    return max(10.0, 3.0 * settings.WORKER_HEARTBEAT_SECONDS)


def executor_count(spark: SparkSession) -> int:
    """The executors the application holds now (the driver's own block manager left out)."""
    jvm_context: Any = spark.sparkContext._jsc.sc()
    return max(0, int(jvm_context.getExecutorMemoryStatus().size()) - 1)


def application_line(spark: SparkSession) -> str:
    """Which Spark application runs the job, for its log: on a cluster, its id is what the
    master's page and the Spark workers' logs name it by."""
    context = spark.sparkContext
    line = f"Spark application {context.applicationId} on {context.master}"
    if not str(context.master).startswith("local"):
        line += f", {executor_count(spark)} executor(s) now"
    ui = context.uiWebUrl
    return f"{line}; its web UI: {ui}" if ui else f"{line}; its web UI is off (SPARK_UI_ENABLED)"


def executor_shortage() -> str:
    """Why this process's cluster application runs no task, or "": it holds no executor
    `executor_wait_seconds` after it started (the master has no free cores for it, or its Spark
    workers are gone). A local session always has its one."""
    session, master = _session, _master
    if session is None or not master or master.startswith("local"):
        return ""
    if time.monotonic() - _started < executor_wait_seconds():
        return ""
    try:
        if executor_count(session):
            return ""
        application = session.sparkContext.applicationId
    except Exception:  # a session being stopped: nothing to say
        logger.debug("could not count the Spark executors", exc_info=True)
        return ""
    return (
        f"Spark application {application} on {master} {NO_EXECUTORS}: the master gave it no cores "
        f"(another application may hold them all; size each worker's application with spark.cores.max "
        f"in its executor's Spark settings) or its Spark workers are gone. Its jobs wait at 0 %."
    )
