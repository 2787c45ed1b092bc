"""Tag the Spark driver's log lines with the job they belong to.

One long-lived SparkSession serves many jobs at once, so its driver log mixes
them. Spark copies a thread's local properties named ``mdc.*`` into the
logging context (MDC) of the task threads it runs for that thread's jobs, and
PySpark pins each Python thread to one JVM thread, so putting the same key in
the calling JVM thread's MDC tags the driver-side lines too. A log4j2
configuration can then route each tag to a file of its own (the worker's
``spark-log4j2.xml`` does).
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from portal.pipeline.spark.gateway import jvm

MDC_KEY = "mdc.flowport.job"


def tag_thread(spark: SparkSession, tag: str | None) -> None:
    """Tag (or, with ``None``, untag) the Spark work of the calling thread."""
    spark.sparkContext.setLocalProperty(MDC_KEY, tag)  # type: ignore[arg-type]  # PySpark: None unsets it
    mdc = jvm(spark).org.slf4j.MDC
    if tag:
        mdc.put(MDC_KEY, tag)
    else:
        mdc.remove(MDC_KEY)
