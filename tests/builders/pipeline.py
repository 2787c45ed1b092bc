"""A JDBC orders table and the pipeline runs over it, as the pipeline's tests share them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.destinations.commitplan import apply_commit_policy
from tests.unit.pipeline.helpers import publish


def run(spark: SparkSession, job: dict[str, Any], state: dict[str, dict[str, str]]) -> dict[str, dict]:
    """One run as the orchestrator does it: previous watermarks and schemas in, commit, state out."""
    job["previous_watermarks"] = dict(state["watermarks"])
    job["previous_schemas"] = dict(state["schemas"])
    states = run_job(spark, job)
    publish(job, states, state["watermarks"])
    for task in apply_commit_policy(job, states):
        if task["committed"] and task.get("source_schema"):
            state["schemas"][task["dataset_urn"]] = task["source_schema"]
    return {s["dataset_urn"]: s for s in states}


def create_orders(pg: psycopg.Connection, table: str, rows: list[tuple[int, str, float, str]]) -> None:
    pg.execute(f"DROP TABLE IF EXISTS {table}")
    pg.execute(
        f"CREATE TABLE {table} (id bigint PRIMARY KEY, customer text, amount numeric(10,2), updated_at timestamp)"
    )
    insert_orders(pg, table, rows)


def insert_orders(pg: psycopg.Connection, table: str, rows: list[tuple[int, str, float, str]]) -> None:
    with pg.cursor() as cur:
        cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s, %s)", rows)  # noqa: S608 - test table


def order_rows(start: int, count: int, ts: str = "2024-01-01 00:00:00") -> list[tuple[int, str, float, str]]:
    return [
        (i, f"c{i % 3}", i * 1.5, f"{ts[:11]}{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}")
        for i in range(start, start + count)
    ]


def orders_props(db: dict[str, Any], tmp_path: Path, tables: str, **extra: str) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
        "source.jdbc.url": db["url"],
        "source.conn.username": db["user"],
        "source.jdbc.tables": tables,
        "extract.delta.fields": "updated_at",
        "extract.primary.key.fields": "id",
        "source.jdbc.num.partitions": "2",
        "data.publisher.final.dir": str(tmp_path / "lake"),
        **extra,
    }


TYPES = """
    id bigint PRIMARY KEY, price numeric(10,2), ratio numeric, big numeric(38,6), real_v real,
    double_v double precision, small_v smallint, int_v integer, flag boolean, name text,
    code char(3), label varchar(20), uid uuid, doc jsonb, raw bytea, day date,
    at_local timestamp, at_zone timestamptz
"""


ROWS = [
    "(1, 12.34, 0.1234567890123456789, 12345678901234567890123456789012.123456, 1.5, 2.25, -3, 7, true,"
    " 'ålesund', 'ab', 'x', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"k\": [1, 2]}', '\\x00ff',"
    " '2024-02-29', '2024-03-31 02:30:00.123456', '2024-03-31 02:30:00+02')",
    "(2, -0.01, -5.0000000000000000005, -1, -0.0, 1e300, 32767, -2147483648, false, '', NULL, '', NULL,"
    " 'null', '', '0001-01-01', '1970-01-01 00:00:00', '1969-12-31 23:59:59.999999+00')",
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
]
