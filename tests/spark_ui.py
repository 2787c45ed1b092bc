"""A real Spark driver with its web UI on, in a process of its own: a SparkContext is one per
process and the suite's own sessions run without a UI. It starts as a worker's would
(portal.pipeline.spark.session, SPARK_UI_ENABLED, the portal's address: loopback), runs one Spark job
described as `JOB_DESCRIPTION`, and stays up until the context ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOB_DESCRIPTION = "flowport proxy story: count ten rows"
DRIVER = textwrap.dedent(
    f"""
    import json, sys
    from portal.pipeline.spark.session import get_or_create_spark
    spark = get_or_create_spark("local[1]", "spark-ui-story")
    spark.sparkContext.setJobDescription({JOB_DESCRIPTION!r})
    spark.range(10).count()
    context = spark.sparkContext
    print(json.dumps({{"ui": context.uiWebUrl, "app": context.applicationId}}), flush=True)
    sys.stdin.read()  # until the test is done with the UI
    spark.stop()
    """
)


@dataclass(frozen=True)
class SparkUI:
    url: str  # as the worker records it (JobExecution.spark_ui_url)
    application_id: str


@contextmanager
def running_spark_ui() -> Iterator[SparkUI]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SPARK_LOCAL_IP", "SPARK_UI_HOST", "FLOWPORT_BIND", "PYSPARK_PYTHON")
    }
    env.update(
        SPARK_UI_ENABLED="true",
        FLOWPORT_BIND="127.0.0.1:8000",
        PYTHONPATH=str(REPO),
        SPARK_LOG_LEVEL="ERROR",
    )
    process = subprocess.Popen(
        [sys.executable, "-c", DRIVER],
        env=env,
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        assert line, "the Spark driver did not start"
        found = json.loads(line)
        assert found["ui"], "the Spark driver started without its UI"
        yield SparkUI(found["ui"], found["app"])
    finally:
        try:
            process.communicate("", timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
