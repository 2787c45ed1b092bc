"""A worker's Spark session starts its Python workers warm: forked from a daemon that has imported
the Arrow reader's and the direct Parquet writer's modules already, so no job pays those imports per
worker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import SparkSession

from portal.pipeline.spark.session import warm_up


def _probe(batches: Iterator[Any]) -> Iterator[Any]:
    import os
    import sys

    import pyarrow as pa

    parent = open(f"/proc/{os.getppid()}/cmdline", "rb").read().split(b"\0")  # noqa: SIM115
    for batch in batches:
        yield pa.RecordBatch.from_pydict(
            {
                "daemon": [b" ".join(parent).decode()] * batch.num_rows,
                "adbc": [
                    all(
                        m in sys.modules
                        for m in ("adbc_driver_postgresql.dbapi", "portal.pipeline.destinations.directwrite")
                    )
                ]
                * batch.num_rows,
            }
        )


def test_python_workers_fork_from_a_daemon_that_imported_the_arrow_reader(spark: SparkSession) -> None:
    assert warm_up(spark) >= 0
    rows = spark.range(0, 2, 1, 2).mapInArrow(_probe, "daemon string, adbc boolean").collect()
    assert len(rows) == 2
    assert all("portal.pipeline.spark.pydaemon" in r.daemon and r.adbc for r in rows), rows
