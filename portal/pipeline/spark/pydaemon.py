"""Spark's Python daemon with the pipeline's worker-side modules already imported.

Spark forks each Python worker from one daemon process per executor, and reaped workers (idle for a
minute) are forked again on the next Python task.  Whatever a worker imports after the fork is paid
again by every new worker: for the Arrow reader (:mod:`portal.pipeline.sources.arrow_pg`) and its Parquet writer
(:mod:`portal.pipeline.destinations.directwrite`) pyarrow,
pandas (PySpark's Arrow UDFs import it) and the ADBC driver cost about a second of CPU per worker.
This daemon imports them once, before it forks, so every worker starts warm: a warm pool, paid once
per executor JVM instead of per job.  :func:`portal.pipeline.spark.session.get_or_create_spark` names it in
``spark.python.daemon.module`` for local masters.
"""

from __future__ import annotations

import contextlib
import importlib

PRELOADED = (
    "pyarrow",
    "pyarrow.compute",
    "pandas",
    "adbc_driver_postgresql.dbapi",
    "pyarrow.parquet",
    "portal.pipeline.sources.arrow_pg",
    "portal.pipeline.destinations.directwrite",
)


def preload() -> None:
    """Import what the workers will need; a module that is not installed is skipped (its user falls
    back or fails on its own, with its own message)."""
    for name in PRELOADED:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


if __name__ == "__main__":
    preload()
    from pyspark import daemon

    daemon.manager()
