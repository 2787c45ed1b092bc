"""One long-lived SparkSession per worker process.

A fresh SparkSession costs seconds; a warm one lets a job start at once. A
SparkContext is per process and not fork-safe, so workers use the `threads`
(or `solo`) pool, and concurrent jobs run as Spark job groups under the FAIR
scheduler (the pipeline sets them). A process holds one Spark master: an
executor on another master needs its own worker process.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from pyspark.sql import SparkSession

from portal.pipeline.logtag import tag_thread
from portal.pipeline.session import get_or_create_spark

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_session: SparkSession | None = None
_master: str | None = None


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


def session_for(master: str, conf: dict[str, Any] | None = None) -> SparkSession:
    """The process's session, created on first use; `conf` of later jobs
    only applies where Spark allows runtime changes (SQL settings)."""
    global _session, _master
    with _lock:
        if _session is None:
            logger.info("starting SparkSession on %s", master)
            _session = get_or_create_spark(
                master,
                f"flowport-worker@{socket.gethostname()}",
                {**(conf or {}), **driver_log_options(conf)},
                log_level=None,  # spark-log4j2.xml sets the levels
            )
            _master = master
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
