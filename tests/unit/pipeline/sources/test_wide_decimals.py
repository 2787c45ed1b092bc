"""A PostgreSQL ``numeric`` or MariaDB ``DECIMAL`` wider than Spark's 38 digits arrives as it left:
Spark's JDBC reader would read ``numeric(50,10)`` as ``decimal(38,0)`` and 1.0123456789 would
arrive as 1, silently, and a 45-digit value of a ``numeric(45,0)`` would fail the run without
naming its column. It is read as the server's text, by Spark's reader and the Arrow one alike,
into Parquet as that text and into a created PostgreSQL table as ``numeric`` again, every digit
kept."""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from tests.builders.props import into_parquet, into_table, whole_table
from tests.builders.servers import mysql
from tests.unit.pipeline.helpers import data_files, run_and_publish, spec

VALUES = ["1.0123456789", "-0.0000000001", "1234567890123456789012345678901234567890.0123456789"]
WHOLE = ["1" + "0" * 43 + "1", "0", "-" + "9" * 45]  # numeric(45,0): Spark says decimal(38,0)


@pytest.mark.parametrize("arrow", ["true", "false"])
def test_a_numeric_50_10_keeps_every_digit_into_parquet_and_postgresql(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path, arrow: str
) -> None:
    source = f"wide_{uuid.uuid4().hex[:6]}"
    pg.execute(f"CREATE TABLE {source} (id int PRIMARY KEY, amount numeric(50,10), whole numeric(45,0))")
    rows = ", ".join(f"({i}, {v}, {w})" for i, (v, w) in enumerate(zip(VALUES, WHOLE, strict=True), 1))
    pg.execute(f"INSERT INTO {source} VALUES {rows}")  # noqa: S608
    want = [(i, Decimal(v), Decimal(w)) for i, (v, w) in enumerate(zip(VALUES, WHOLE, strict=True), 1)]
    common = whole_table(pg_database["url"], pg_database["user"], source, **{"source.jdbc.arrow": arrow})
    parquet = {**common, **into_parquet(tmp_path / "out")}
    states = run_and_publish(spark, spec(tmp_path / "p", parquet), {})
    assert [s.get("error") for s in states] == [None], states
    rows = [r for f in data_files(tmp_path / "out" / source) for r in pq.read_table(f).to_pylist()]
    assert sorted((r["id"], Decimal(r["amount"]), Decimal(r["whole"])) for r in rows) == want

    target = f"{source}_copy"
    into_pg = {**common, **into_table(pg_database["url"], pg_database["user"], target)}
    states = run_and_publish(spark, spec(tmp_path / "q", into_pg), {})
    assert [s.get("error") for s in states] == [None], states
    kinds = pg.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass"
        " AND attname IN ('amount', 'whole')",
        (target,),
    ).fetchall()
    assert kinds == [("numeric",), ("numeric",)], kinds
    got = pg.execute(f"SELECT id, amount, whole FROM {target} ORDER BY id").fetchall()  # noqa: S608
    assert got == want


def test_a_mariadb_decimal_65_keeps_every_digit(
    spark: SparkSession, mysql_database: dict[str, Any], tmp_path: Path
):
    source = f"wide_my_{uuid.uuid4().hex[:6]}"
    widest = "9" * 35 + "." + "9" * 30
    create = f"CREATE TABLE {source} (id int PRIMARY KEY, amount decimal(65,30), whole decimal(65,0), small decimal(38,0))"
    rows = f"(1, {widest}, {'9' * 65}, {'9' * 38}), (2, 0, -1, 0)"
    mysql(f"{create}; INSERT INTO {source} VALUES {rows}", mysql_database["db"])  # noqa: S608
    props = {**whole_table(mysql_database["url"], "root", source), **into_parquet(tmp_path / "out")}
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert [s.get("error") for s in states] == [None], states

    copy = pa.concat_tables([pq.read_table(f) for f in data_files(tmp_path / "out" / source)])
    # the widest as their text; a decimal(38,0), which Spark holds, stays a decimal
    assert [str(copy.schema.field(c).type) for c in ("amount", "whole", "small")] == [
        "string",
        "string",
        "decimal128(38, 0)",
    ]
    got = sorted((r["id"], Decimal(r["amount"]), Decimal(r["whole"]), r["small"]) for r in copy.to_pylist())
    assert got == [(1, Decimal(widest), Decimal("9" * 65), Decimal("9" * 38)), (2, 0, -1, 0)]


@pytest.mark.parametrize("arrow", ["true", "false"])
def test_a_numeric_45_0_keeps_every_digit_as_watermark_and_key(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path, arrow: str
) -> None:
    """Compared on the server as its text, never cut to Spark's 38 digits; its values beyond
    64 bits are no bounds Spark can split the read on, so it is read in one piece."""
    source = f"wide_key_{uuid.uuid4().hex[:6]}"
    pg.execute(f"CREATE TABLE {source} (k numeric(45,0) PRIMARY KEY, w numeric(45,0), v text)")
    big = 10**44
    pg.execute(f"INSERT INTO {source} VALUES ({big + 1}, {big + 1}, 'a'), ({big + 2}, {big + 2}, 'b')")  # noqa: S608
    target = f"{source}_copy"
    props = {
        **whole_table(pg_database["url"], pg_database["user"], source, **{"source.jdbc.arrow": arrow}),
        "extract.is.full": "false",
        "extract.delta.fields": "w",
        "extract.primary.key.fields": "k",
        **into_table(pg_database["url"], pg_database["user"], target, **{"writer.write.mode": "merge"}),
    }
    marks: dict[str, str] = {}
    for execution in (1, 2):
        states = run_and_publish(spark, spec(tmp_path / str(execution), props, execution), marks)
        assert [s.get("error") for s in states] == [None], states
        if execution == 1:
            pg.execute(f"UPDATE {source} SET w = {big + 3}, v = 'b2' WHERE k = {big + 2}")  # noqa: S608

    assert marks[source] == str(big + 3)
    got = pg.execute(f"SELECT k, v FROM {target} ORDER BY k").fetchall()  # noqa: S608
    assert got == [(Decimal(big + 1), "a"), (Decimal(big + 2), "b2")]
