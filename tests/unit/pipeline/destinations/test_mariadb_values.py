"""Every value of the PostgreSQL value table (tests/values.py) arrives in a MariaDB table as it
left, merged by key and appended alike: the table the writer creates keeps microseconds, dates
before 1970 and after 2038 and blobs over 64 KiB (Spark's own MySQL types would not), an instant
lands as its UTC time, and an array as its JSON text. A NaN or an infinity, which MariaDB cannot
store, fails the run naming the column and leaves the table as it was (README, "Types")."""

from __future__ import annotations

import datetime as dt
import json
import struct
import uuid
from pathlib import Path
from typing import Any

import pymysql
import pytest

from tests.builders.servers import MYSQL_HOST, MYSQL_PORT
from tests.values import COLUMNS, ROWS, create_sql, texts

from ..helpers import run_and_publish, spec

JDBC = "portal.pipeline.sources.jdbc.JdbcSource"
BIG_BLOB = bytes(range(256)) * 1024  # 256 KiB: over a MariaDB BLOB's 64 KiB
# Carried as the text PostgreSQL prints (MariaDB has no such type, or Spark reads them as text).
AS_TEXT = ("nn", "tm", "iv", "u", "j", "jb")


def job(pg_database: dict[str, Any], mysql_database: dict[str, Any], source: str, target: str, mode: str):
    return {
        "source.class": JDBC,
        "source.jdbc.url": pg_database["url"],
        "source.conn.username": pg_database["user"],
        "source.jdbc.tables": source,
        "extract.is.full": "true",
        "writer.output.format": "jdbc",
        "writer.jdbc.url": mysql_database["url"],
        "writer.jdbc.username": mysql_database["user"],
        "writer.jdbc.table": target,
        "writer.write.mode": mode,
        "extract.primary.key.fields": "id",
    }


def read_back(mysql_database: dict[str, Any], table: str) -> dict[int, dict[str, Any]]:
    conn = pymysql.connect(
        host=MYSQL_HOST, port=MYSQL_PORT, user="root", password="", database=mysql_database["db"]
    )
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(f"SELECT * FROM `{table}`")  # noqa: S608
            return {row["id"]: row for row in cur.fetchall()}
    finally:
        conn.close()


def assert_same(got: dict[str, Any], want: dict[str, Any], text: dict[str, Any]) -> None:
    for column in COLUMNS:
        value, found = want[column], got[column]
        where = (want["id"], column)
        if text[column] is None:  # SQL's NULL (json's null is a value)
            assert found is None, where
        elif column in AS_TEXT:
            assert found == text[column], where
        elif column == "tstz":
            assert found == value.astimezone(dt.UTC).replace(tzinfo=None), where
        elif column in ("arr", "tags"):
            assert json.loads(found) == value, where
        elif column == "f4":  # a single-precision float: MariaDB prints its shortest text
            assert struct.pack("f", found) == struct.pack("f", value), where
        elif column == "ok":
            assert bool(found) is value, where
        elif column == "b":
            assert found == bytes(value), where
        else:
            assert found == value, where


@pytest.mark.parametrize("mode", ["merge", "append"])
def test_every_value_arrives_in_a_mariadb_table_as_it_left(
    spark, pg, pg_database, mysql_database, tmp_path: Path, mode: str
):
    source, target = f"mv_{uuid.uuid4().hex[:6]}", f"mv_copy_{uuid.uuid4().hex[:6]}"
    pg.execute(create_sql(source))
    pg.execute(f"INSERT INTO {source} VALUES {', '.join(ROWS)}")  # noqa: S608
    # MariaDB cannot hold NaN or an infinity: the finite edges instead (the refusal is below)
    pg.execute(f"UPDATE {source} SET f4 = -3.4e38, f8 = 1.7976931348623157e308 WHERE id = 1")  # noqa: S608
    edges = "f4 = 1.5e-45, f8 = -2.2250738585072014e-308, b = %s"
    pg.execute(f"UPDATE {source} SET {edges} WHERE id = 2", (BIG_BLOB,))  # noqa: S608
    pg.execute(f"UPDATE {source} SET f4 = 0, f8 = -0.0 WHERE id = 3")  # noqa: S608

    states = run_and_publish(
        spark, spec(tmp_path, job(pg_database, mysql_database, source, target, mode)), {}
    )
    assert [s.get("error") for s in states] == [None], states

    want = {r[0]: dict(zip(COLUMNS, r, strict=True)) for r in pg.execute(f"SELECT * FROM {source}")}  # noqa: S608
    text = {int(r[0]): dict(zip(COLUMNS, r, strict=True)) for r in texts(pg, source)}
    got = read_back(mysql_database, target)
    assert sorted(got) == [1, 2, 3, 4]
    for key, row in got.items():
        assert_same(row, want[key], text[key])
    assert got[1]["ts"] == dt.datetime(1901, 12, 14, 20, 45, 52, 1)  # before 1970, to the microsecond
    assert got[2]["tstz"] == dt.datetime(2040, 1, 1, 13, 4, 5, 123456)  # after 2038, in UTC
    assert got[2]["b"] == BIG_BLOB


def test_a_nan_fails_the_run_naming_the_column_and_leaves_the_table(
    spark, pg, pg_database, mysql_database, tmp_path: Path
):
    source, target = f"mv_{uuid.uuid4().hex[:6]}", f"mv_copy_{uuid.uuid4().hex[:6]}"
    pg.execute(f"CREATE TABLE {source} (id int PRIMARY KEY, reading double precision)")
    pg.execute(f"INSERT INTO {source} VALUES (1, 2.5)")  # noqa: S608
    props = {**job(pg_database, mysql_database, source, target, "merge")}
    first = run_and_publish(spark, spec(tmp_path / "first", props), {})
    assert [s.get("error") for s in first] == [None], first

    pg.execute(f"INSERT INTO {source} VALUES (2, 'NaN'), (3, 7.0)")  # noqa: S608
    states = run_and_publish(spark, spec(tmp_path / "second", props, execution_id=2), {})
    errors = [s.get("error") or "" for s in states]
    assert any("column 'reading' holds NaN, Infinity or -Infinity" in e for e in errors), errors
    assert "Unknown column" not in " ".join(errors)
    assert {k: r["reading"] for k, r in read_back(mysql_database, target).items()} == {1: 2.5}
