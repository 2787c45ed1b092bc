"""The JVM behind a SparkSession, as py4j shows it to Python.

PySpark types its JVM view as optional (a stopped SparkContext has none); every
caller here holds a live session, so one place turns "none" into a clear error
and the rest reach Java classes without repeating the check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the commit side may run without Spark importable
    from pyspark.sql import SparkSession


def jvm(spark: SparkSession) -> Any:
    """The py4j view of ``spark``'s JVM (its Java packages as attributes)."""
    view = spark.sparkContext._jvm
    if view is None:
        raise RuntimeError("the SparkSession has been stopped: it has no JVM")
    return view


def active_jvm() -> Any:
    """The JVM of this thread's active SparkSession (the caller knows there is one)."""
    from pyspark.sql import SparkSession  # imported lazily: see above

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError("no active SparkSession")
    return jvm(spark)
