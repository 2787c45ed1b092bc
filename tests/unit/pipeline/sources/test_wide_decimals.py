"""A PostgreSQL ``numeric`` wider than Spark's 38 digits arrives as it left: Spark's JDBC reader
would read ``numeric(50,10)`` as ``decimal(38,0)`` and 1.0123456789 would arrive as 1, silently.
It is read as the server's text, by Spark's reader and the Arrow one alike, into Parquet as that
text and into a created PostgreSQL table as ``numeric`` again, every digit kept."""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from tests.unit.pipeline.helpers import data_files, run_and_publish, spec

JDBC = "portal.pipeline.sources.jdbc.JdbcSource"
VALUES = ["1.0123456789", "-0.0000000001", "1234567890123456789012345678901234567890.0123456789"]


@pytest.mark.parametrize("arrow", ["true", "false"])
def test_a_numeric_50_10_keeps_every_digit_into_parquet_and_postgresql(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path, arrow: str
) -> None:
    source = f"wide_{uuid.uuid4().hex[:6]}"
    pg.execute(f"CREATE TABLE {source} (id int PRIMARY KEY, amount numeric(50,10))")
    pg.execute(
        f"INSERT INTO {source} VALUES " + ", ".join(f"({i}, {v})" for i, v in enumerate(VALUES, 1))  # noqa: S608
    )
    common = {
        "source.class": JDBC,
        "source.jdbc.url": pg_database["url"],
        "source.conn.username": pg_database["user"],
        "source.jdbc.tables": source,
        "source.jdbc.arrow": arrow,
        "extract.is.full": "true",
    }
    parquet = {**common, "writer.output.format": "parquet", "data.publisher.final.dir": str(tmp_path / "out")}
    states = run_and_publish(spark, spec(tmp_path / "p", parquet), {})
    assert [s.get("error") for s in states] == [None], states
    rows = [r for f in data_files(tmp_path / "out" / source) for r in pq.read_table(f).to_pylist()]
    assert sorted((r["id"], Decimal(r["amount"])) for r in rows) == [
        (i, Decimal(v)) for i, v in enumerate(VALUES, 1)
    ]

    target = f"{source}_copy"
    into_pg = {
        **common,
        "writer.output.format": "jdbc",
        "writer.jdbc.url": pg_database["url"],
        "writer.jdbc.username": pg_database["user"],
        "writer.jdbc.table": target,
    }
    states = run_and_publish(spark, spec(tmp_path / "q", into_pg), {})
    assert [s.get("error") for s in states] == [None], states
    kind = pg.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass"
        " AND attname = 'amount'",
        (target,),
    ).fetchone()
    assert kind == ("numeric",), kind
    got = pg.execute(f"SELECT id, amount FROM {target} ORDER BY id").fetchall()  # noqa: S608
    assert got == [(i, Decimal(v)) for i, v in enumerate(VALUES, 1)]
