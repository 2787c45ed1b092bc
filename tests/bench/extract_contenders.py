"""The contenders of bench_extract.py that are not Flowport: run by the benchmark-only virtualenv's
Python (``.venv-bench``, tests/bench/requirements-bench.txt), one load per process, printing one JSON
line ``{"seconds": ..., "rows": ...}`` (the load's own time, without the interpreter's start).

    python extract_contenders.py connectorx CONN QUERY OUT.parquet PARTITIONS
    python extract_contenders.py dlt CONN TABLE OUT_DIR WORK_DIR [INITIAL_UPDATED_AT]
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time


def connectorx(conn: str, query: str, out: str, partitions: str) -> dict[str, float]:
    import connectorx as cx
    import pyarrow.parquet as pq

    started = time.perf_counter()
    table = cx.read_sql(conn, query, return_type="arrow", partition_on="id", partition_num=int(partitions))
    pq.write_table(table, out)
    return {"seconds": time.perf_counter() - started, "rows": table.num_rows}


def dlt_load(conn: str, table: str, out: str, work: str, initial: str = "") -> dict[str, float]:
    """dlt's ``sql_database`` with the connectorx backend into filesystem Parquet; an incremental
    load is a fresh pipeline whose cursor starts at ``initial`` (the previous load's high)."""
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
    import dlt
    from dlt.sources.sql_database import sql_table

    started = time.perf_counter()
    cursor = dlt.sources.incremental(
        "updated_at", initial_value=dt.datetime.fromisoformat(initial) if initial else None
    )
    resource = sql_table(credentials=conn, table=table, backend="connectorx", incremental=cursor)
    pipeline = dlt.pipeline(
        pipeline_name="bench_extract",
        destination=dlt.destinations.filesystem(bucket_url=out),
        dataset_name="bench",
        pipelines_dir=work,
    )
    pipeline.run(resource, loader_file_format="parquet")
    counts = pipeline.last_trace.last_normalize_info.row_counts
    return {"seconds": time.perf_counter() - started, "rows": counts.get(table, 0)}


if __name__ == "__main__":
    name, *args = sys.argv[1:]
    result = connectorx(*args) if name == "connectorx" else dlt_load(*args)
    print(json.dumps(result), flush=True)
