"""Bad records beside a table destination: a job whose branches write to JDBC or Iceberg tables (and
no files) sets the rows its source could not read (:mod:`portal.pipeline.badrows`) aside in an
error *table* beside each destination table, ``<target>_errors``, instead of the err folder.

Within the limits (``errors.max.count`` / ``errors.max.fraction``) the task stages them as its data:

* JDBC: into a staging table beside the branch's own (``<staging>_err``, written by the branch's
  writer, so the same connection, landing check and dialect), dropped with it when the task fails;
* Iceberg: as one Parquet file in the branch's task output, outside the files its data commit takes.

The publish then moves them with the run's own commit steps, so they are published exactly once,
with the run or not at all: a ``jdbc_publish`` step appending the staged rows to
``<target>_errors`` with its marker in ``<marker table>_errors`` (a retry finds the marker and
does nothing), or an ``iceberg_commit`` step appending the file to ``<table>_errors`` (the table
is its own marker).  Each row: the job, execution id and task, the dataset, the source file and
line, the reason and the raw record, as the ``_errors/*.jsonl`` files beside a files dataset.
"""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from portal.pipeline import fs

SUFFIX = "_errors"
JDBC_SHARED = ("url", "user", "password_property", "execution_id", "job_name", "user_node")
ICEBERG_SHARED = (
    "catalog_uri",
    "password_property",
    "warehouse",
    "namespace",
    "execution_id",
    "job_name",
    "flow",
    "user_node",
)
FORMATS = ("JDBC", "ICEBERG")
COLUMNS = (
    ("job", T.StringType()),
    ("execution_id", T.LongType()),
    ("task_id", T.StringType()),
    ("dataset_urn", T.StringType()),
    ("source_file", T.StringType()),
    ("line", T.LongType()),
    ("reason", T.StringType()),
    ("record", T.StringType()),
)


def takes(writer: Any) -> bool:
    """Whether a branch's writer is a table destination whose bad records go to an error table."""
    return getattr(writer, "format", "") in FORMATS


def error_table(table: str) -> str:
    """``schema.orders`` -> ``schema.orders_errors``: beside the destination table, in its schema."""
    return table + SUFFIX


def _values(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [tuple(row.get(name) for name, _ in COLUMNS) for row in rows]


def stage(spark: SparkSession, writer: Any, state: Any, rows: list[dict[str, Any]], name: str) -> None:
    """Stage the task's bad rows for the branch's publish (see the module docstring); the branch
    state records where (``bad_records``: ``staging_table`` or ``file``, and ``rows``)."""
    if writer.format == "JDBC":
        schema = T.StructType([T.StructField(n, t) for n, t in COLUMNS])
        table = writer.stage_errors(spark.createDataFrame(_values(rows), schema))
        state.bad_records = {"staging_table": table, "rows": len(rows)}
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrow = pa.schema([(n, pa.int64() if isinstance(t, T.LongType) else pa.string()) for n, t in COLUMNS])
    path = fs.join(writer.output_dir, "_errors", name.rsplit(".", 1)[0] + ".parquet")
    local = fs.local_path(path)  # an Iceberg branch's task output is local (its commit moves files)
    os.makedirs(os.path.dirname(local), exist_ok=True)
    columns = list(zip(*_values(rows), strict=True)) if rows else [() for _ in COLUMNS]
    pq.write_table(pa.Table.from_arrays([list(c) for c in columns], schema=arrow), local)
    state.bad_records = {"file": path, "rows": len(rows)}


def where(writer: Any) -> str:
    """The error table a branch's bad records are published to, as the execution page names it."""
    if writer.format == "ICEBERG":
        return f"Iceberg table {writer.spec['namespace']}.{error_table(writer.spec['table'])}"
    return f"table {error_table(writer.table)} ({_database(writer.url)})"


def _database(url: str) -> str:
    """``jdbc:postgresql://db:5432/sales?x=y`` -> ``postgresql db:5432/sales`` (no user or password)."""
    rest = url.removeprefix("jdbc:")
    scheme, _, tail = rest.partition("://")
    tail = tail.split("?", 1)[0].rsplit("@", 1)[-1]
    return f"{scheme} {tail}" if tail else rest.split("?", 1)[0]


def add_steps(
    steps: dict[int, dict[str, Any]],
    data_step: dict[str, Any] | None,
    branch: dict[str, Any],
    urn: str,
) -> None:
    """Gather a committed branch's staged bad rows into the dataset's error-table step of that
    branch, shaped from the branch's data step (same database or catalog, same secret's name)."""
    staged = branch.get("bad_records") or {}
    if not staged or data_step is None:
        return
    index = branch["index"]
    if data_step["type"] == "jdbc_publish":
        step = steps.setdefault(
            index,
            {
                **{k: data_step[k] for k in JDBC_SHARED},
                "type": "jdbc_publish",
                "dataset_urn": urn,
                "branch": index,
                "target_table": error_table(data_step["target_table"]),
                "marker_table": error_table(data_step["marker_table"]),
                "staging_tables": [],
                "rows": 0,
                "write_mode": "append",
                "merge_keys": [],
                "evolve": False,
            },
        )
        step["staging_tables"].append(staged["staging_table"])
    else:
        step = steps.setdefault(
            index,
            {
                **{k: data_step[k] for k in ICEBERG_SHARED},
                "type": "iceberg_commit",
                "dataset_urn": urn,
                "branch": index,
                "table": error_table(data_step["table"]),
                "mode": "append",
                "merge_keys": [],
                "files": [],
                "rows": 0,
                "watermark": None,
            },
        )
        path = staged["file"]
        step["files"].append({"src": path, "relative": path.rsplit("/", 1)[-1]})
    step["rows"] += int(staged["rows"])
