"""Every value a JDBC read takes arrives as it left (issue #48), by Spark's JDBC reader and by the
Arrow path alike: into a PostgreSQL table merged by key — created with the source's own column
types (a wall-time ``timestamp`` stays one, ``time`` keeps its microseconds, jsonb, uuid and
interval keep their types) — and into Parquet, where each value has a type that holds it or its
text (README, "Types"). A MariaDB ``DATETIME`` stays a wall time and a ``TIME`` its text."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.builders.servers import mysql
from tests.unit.pipeline.helpers import data_files, run_and_publish, spec
from tests.values import COLUMNS, PARQUET, ROWS, assert_same_row, column_types, create_sql, texts

JDBC = "portal.pipeline.sources.jdbc.JdbcSource"
# Parquet's type for each column a JDBC read gives a type (the rest, an unconstrained numeric among
# them: the server's text).
TYPED = {c: t for c, t in PARQUET.items() if c != "nn"} | {
    "arr": pa.list_(pa.int32()),
    "tags": pa.list_(pa.string()),
}


@pytest.mark.parametrize("arrow", ["true", "false"])
def test_every_value_of_a_jdbc_read_arrives_as_it_left(spark, pg, pg_database, tmp_path: Path, arrow: str):
    source, target = f"jv_{uuid.uuid4().hex[:6]}", f"jv_copy_{uuid.uuid4().hex[:6]}"
    pg.execute(create_sql(source))
    pg.execute(f"INSERT INTO {source} VALUES {', '.join(ROWS)}")  # noqa: S608
    common = {
        "source.class": JDBC,
        "source.jdbc.url": pg_database["url"],
        "source.conn.username": pg_database["user"],
        "source.jdbc.tables": source,
        "extract.is.full": "true",
        "source.jdbc.arrow": arrow,
    }
    merged = {
        **common,
        "writer.output.format": "jdbc",
        "writer.jdbc.url": pg_database["url"],
        "writer.jdbc.username": pg_database["user"],
        "writer.jdbc.table": target,
        "writer.write.mode": "merge",
        "extract.primary.key.fields": "id",
    }
    files = {**common, "writer.output.format": "parquet", "data.publisher.final.dir": str(tmp_path / "out")}
    for name, props in (("merged", merged), ("files", files)):
        states = run_and_publish(spark, spec(tmp_path / name, props), {})
        assert [s.get("error") for s in states] == [None], states

    expected = texts(pg, source)
    assert texts(pg, target) == expected
    # json has no equality operator, which a merge's history compares by: its text, as written; a
    # varchar's length is not in what Spark's reader says of it
    assert column_types(pg, target) == column_types(pg, source) | {"j": "text", "vc": "text"}

    copy = pa.concat_tables([pq.read_table(p) for p in data_files(tmp_path / "out" / source)])
    assert {c: copy.schema.field(c).type for c in TYPED} == TYPED
    assert all(copy.schema.field(c).type == pa.string() for c in COLUMNS if c not in TYPED)
    want = {r[0]: dict(zip(COLUMNS, r, strict=True)) for r in pg.execute(f"SELECT * FROM {source}")}  # noqa: S608
    text = {int(r[0]): dict(zip(COLUMNS, r, strict=True)) for r in expected}
    got = {row["id"]: row for row in copy.to_pylist()}
    assert sorted(got) == [1, 2, 3, 4]
    for key, row in got.items():
        assert_same_row(row, want[key], text[key], TYPED)
    assert got[2]["tm"] == "23:59:59.999999" and got[1]["ts"] == dt.datetime(1901, 12, 14, 20, 45, 52, 1)


def test_a_wall_time_watermark_reads_on_where_the_last_run_stopped(spark, pg, pg_database, tmp_path: Path):
    table = f"jv_inc_{uuid.uuid4().hex[:6]}"
    pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, at timestamp)")
    pg.execute(f"INSERT INTO {table} VALUES (1, '2025-01-01 10:00:00.000001'), (2, '2025-01-01 11:00:00')")  # noqa: S608
    props = {
        "source.class": JDBC,
        "source.jdbc.url": pg_database["url"],
        "source.conn.username": pg_database["user"],
        "source.jdbc.tables": table,
        "extract.delta.fields": "at",
        "writer.output.format": "parquet",
        "data.publisher.final.dir": str(tmp_path / "out"),
    }
    marks: dict[str, str] = {}
    run_and_publish(spark, spec(tmp_path, props), marks)
    pg.execute(f"INSERT INTO {table} VALUES (3, '2025-01-01 11:00:00.5')")  # noqa: S608
    run_and_publish(spark, spec(tmp_path, props, execution_id=2), marks)

    rows = [r for p in data_files(tmp_path / "out" / table) for r in pq.read_table(p).to_pylist()]
    assert sorted((r["id"], r["at"]) for r in rows) == [
        (1, dt.datetime(2025, 1, 1, 10, 0, 0, 1)),
        (2, dt.datetime(2025, 1, 1, 11, 0)),
        (3, dt.datetime(2025, 1, 1, 11, 0, 0, 500000)),
    ]  # each once, naive as in the table
    assert marks[table].startswith("2025-01-01 11:00:00.5")


def test_a_mariadb_datetime_stays_a_wall_time_and_a_time_its_text(spark, mysql_database, tmp_path: Path):
    table = f"jv_my_{uuid.uuid4().hex[:6]}"
    create = f"CREATE TABLE {table} (id int PRIMARY KEY, at DATETIME(6), lasted TIME(6), stamped TIMESTAMP(6) NULL)"
    rows = "(1, '1969-07-20 20:17:40.123456', '838:59:59.999999', NULL), (2, '2040-02-29 23:59:59.999999', '-00:00:00.000001', '2001-02-03 04:05:06.7')"
    mysql(f"{create}; INSERT INTO {table} VALUES {rows}", mysql_database["db"])  # noqa: S608
    props = {
        "source.class": JDBC,
        "source.jdbc.url": mysql_database["url"],
        "source.conn.username": "root",
        "source.jdbc.tables": table,
        "extract.is.full": "true",
        "writer.output.format": "parquet",
        "data.publisher.final.dir": str(tmp_path / "out"),
    }
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert [s.get("error") for s in states] == [None], states

    copy = pa.concat_tables([pq.read_table(p) for p in data_files(tmp_path / "out" / table)])
    assert copy.schema.field("at").type == pa.timestamp("us")
    assert copy.schema.field("lasted").type == pa.string()
    assert copy.schema.field("stamped").type == pa.timestamp("us", tz="UTC")  # an instant: it is one
    found: dict[int, Any] = {r["id"]: r for r in copy.to_pylist()}
    assert found[1]["at"] == dt.datetime(1969, 7, 20, 20, 17, 40, 123456)
    assert found[2]["at"] == dt.datetime(2040, 2, 29, 23, 59, 59, 999999)
    assert (found[1]["lasted"], found[2]["lasted"]) == ("838:59:59.999999", "-00:00:00.000001")
