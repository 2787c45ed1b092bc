"""Every value arrives as it left, change data capture from PostgreSQL (snapshot and log) into a
PostgreSQL table merged by key and a Parquet change log: integers at their limits, numeric at its
precision's edge and unconstrained, NaN and infinities, text with quotes, newlines, tabs,
backslashes, emoji, CJK and the literal strings NULL and \\N, empty against NULL, bytea with every
byte, dates before 1970 and after 2038, timestamps with and without a time zone (offsets -12 to
+14, microseconds), time, interval, uuid, json, jsonb and arrays. A created PostgreSQL table has the
source's column types; Parquet has a type that holds each value, or the value's text (README,
"Types")."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.pg_logical import logical_pg, own_database  # noqa: F401 (fixture)

from .helpers import data_files, run_and_publish, spec

CDC = "portal.pipeline.sources.cdc.CdcSource"
COLUMNS = {
    "id": "int PRIMARY KEY",
    "i2": "smallint",
    "i4": "integer",
    "i8": "bigint",
    "n": "numeric(12,2)",
    "nn": "numeric",
    "f4": "real",
    "f8": "double precision",
    "t": "text",
    "vc": "varchar(20)",
    "b": "bytea",
    "ok": "boolean",
    "d": "date",
    "tm": "time",
    "ts": "timestamp",
    "tstz": "timestamptz",
    "iv": "interval",
    "u": "uuid",
    "j": "json",
    "jb": "jsonb",
    "arr": "int[]",
    "tags": "text[]",
}
# Parquet's type for each (the rest: the server's text of the value)
PARQUET = {
    "id": pa.int32(), "i2": pa.int16(), "i4": pa.int32(), "i8": pa.int64(), "n": pa.decimal128(12, 2),
    "f4": pa.float32(), "f8": pa.float64(), "b": pa.binary(), "ok": pa.bool_(), "d": pa.date32(),
    "ts": pa.timestamp("us"), "tstz": pa.timestamp("us", tz="UTC"), "nn": pa.decimal128(38, 18),
}  # fmt: skip
EVERY_BYTE = "'\\x" + bytes(range(256)).hex() + "'"
ROWS = [
    "(1, -32768, -2147483648, -9223372036854775808, -9999999999.99, 1e-18, 'NaN', 'NaN',"
    " E'quote '' \" back\\\\slash\\nnew\\ttab', 'NULL', " + EVERY_BYTE + ", true, '1969-12-31', '00:00:00',"
    " '1901-12-14 20:45:52.000001', '1969-12-31 23:59:59.999999-12', '-1 year -2 mons +3 days -04:05:06.7',"
    ' \'00000000-0000-0000-0000-000000000000\', \'{"b": 1,  "a": [1, 2.50]}\', \'{"b": 1, "a": null}\','
    " '{1,NULL,-3}', ARRAY['a,b', 'NULL', '', NULL, '\"q\"'])",
    "(2, 32767, 2147483647, 9223372036854775807, 9999999999.99, 12345678901234567890.123456789012345678,"
    " 'Infinity', '-Infinity', '🙂 中文 \\N', '\\N', '\\x00', false, '2040-02-29', '23:59:59.999999',"
    " '2262-04-11 23:47:16.854775', '2040-01-02 03:04:05.123456+14', '1 day 00:00:00.000001',"
    " 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '[]', '[\"x\", {\"y\": \"z\"}]', '{}', '{}')",
    "(3, 0, 0, 0, 0.01, -0.000001, '-Infinity', 'Infinity', '', '', '\\x', NULL, '0001-01-01', '12:00',"
    " '1970-01-01 00:00:00', '2000-01-01 00:00:00+05:45', '0', 'ffffffff-ffff-ffff-ffff-ffffffffffff',"
    " 'null', '\"text\"', NULL, NULL)",
    "(4" + ", NULL" * (len(COLUMNS) - 1) + ")",
]


@pytest.fixture
def source(logical_pg: str) -> Iterator[dict[str, Any]]:  # noqa: F811
    columns = ", ".join(f"{name} {kind}" for name, kind in COLUMNS.items())
    with own_database(logical_pg, "CREATE SCHEMA shop", f"CREATE TABLE shop.v ({columns})") as found:
        found["db"].execute(f"INSERT INTO shop.v VALUES {ROWS[0]}, {ROWS[1]}")  # noqa: S608
        yield found


def texts(conn: Any, table: str) -> list[tuple[Any, ...]]:
    """Each row's values as PostgreSQL prints them, for value-for-value comparison across types."""
    select = ", ".join(f"{name}::text" for name in COLUMNS)
    table, _, where = table.partition(" WHERE ")
    condition = f" WHERE {where}" if where else ""
    return conn.execute(f"SELECT {select} FROM {table} AS src{condition} ORDER BY src.id").fetchall()  # noqa: S608


def test_every_value_arrives_as_it_left_in_postgresql_and_parquet(
    spark, source, tmp_path: Path, pg, pg_database
):
    target = f"cdc_values_{uuid.uuid4().hex[:6]}"
    common = {
        "source.class": CDC,
        "source.jdbc.url": source["url"],
        "source.conn.username": "postgres",
        "source.cdc.tables": "shop.v",
    }
    merged = spec(
        tmp_path / "merged",
        {
            **common,
            "writer.output.format": "jdbc",
            "writer.jdbc.url": pg_database["url"],
            "writer.jdbc.username": pg_database["user"],
            "writer.jdbc.table": target,
            "writer.write.mode": "merge",
            "extract.primary.key.fields": "id",
            "extract.delta.fields": "_cdc_position",
            "writer.merge.delete.column": "_cdc_deleted",
        },
        flow_id=41,
    )
    history = spec(
        tmp_path / "history",
        {**merged["properties"], "writer.jdbc.table": f"{target}_h", "writer.write.mode": "history"},
        flow_id=43,
        job_name="history",
    )
    files = spec(
        tmp_path / "files",
        {**common, "writer.output.format": "parquet", "data.publisher.final.dir": str(tmp_path / "out")},
        flow_id=42,
        job_name="files",
    )
    marks: dict[str, dict[str, str]] = {"merged": {}, "history": {}, "files": {}}
    db = source["db"]
    for execution in (1, 2):  # the snapshot, then the same kinds of values from the log
        for name, job in (("merged", merged), ("history", history), ("files", files)):
            job["execution_id"] = 400 + execution
            states = run_and_publish(spark, job, marks[name])
            assert [s.get("error") for s in states] == [None], states
        if execution == 1:
            db.execute(f"INSERT INTO shop.v VALUES {ROWS[2]}, {ROWS[3]}")  # noqa: S608
            db.execute("UPDATE shop.v SET id = id + 10 WHERE id IN (1, 2)")
            db.execute("UPDATE shop.v SET t = t || ' again', b = b || '\\x00'::bytea WHERE id = 11")

    expected = texts(db, "shop.v")
    assert [r[0] for r in expected] == ["3", "4", "11", "12"]
    assert texts(pg, target) == expected
    # a history compares every column of the current versions (an equality for each kept type)
    assert texts(pg, f"{target}_h WHERE is_current") == expected
    # ids 1 and 2 moved to 11 and 12: their old keys closed
    assert pg.execute(f"SELECT count(*) FROM {target}_h WHERE NOT is_current").fetchone() == (2,)  # noqa: S608
    kinds = dict(
        pg.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = %s::regclass AND attnum > 0",
            (target,),
        ).fetchall()
    )
    source_kinds = dict(
        db.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = 'shop.v'::regclass AND attnum > 0"
        ).fetchall()
    )
    # json has no equality operator, which a history's merge compares by: its text, as written
    assert {c: kinds[c] for c in COLUMNS} == source_kinds | {"j": "text"}

    log = pa.concat_tables([pq.read_table(p) for p in data_files(tmp_path / "out" / "shop.v")])
    assert {c: log.schema.field(c).type for c in PARQUET} == PARQUET
    assert all(log.schema.field(c).type == pa.string() for c in COLUMNS if c not in PARQUET)
    latest: dict[int, dict[str, Any]] = {}
    for row in sorted(log.to_pylist(), key=lambda r: r["_cdc_position"]):
        if row["_cdc_op"] == "d":
            latest.pop(row["id"], None)
        else:
            latest[row["id"]] = row
    assert sorted(latest) == [3, 4, 11, 12]
    want = {
        int(r[0]): dict(zip(COLUMNS, r, strict=True))
        for r in db.execute(f"SELECT {', '.join(COLUMNS)} FROM shop.v").fetchall()  # noqa: S608
    }
    text = {int(r[0]): dict(zip(COLUMNS, r, strict=True)) for r in expected}
    for key, row in latest.items():
        for column in COLUMNS:
            got, value = row[column], want[key][column]
            if column not in PARQUET:  # the server's own text
                assert got == text[key][column], (key, column)
            elif isinstance(value, float) and value != value:
                assert got != got, (key, column)
            elif column == "tstz" and value is not None:
                assert got == value.astimezone(dt.UTC), (key, column)
            elif column == "b" and value is not None:
                assert got == bytes(value), (key, column)
            else:
                assert got == value, (key, column)
    assert latest[11]["b"] == bytes(range(256)) + b"\x00" and latest[11]["t"].endswith(
        "slash\nnew\ttab again"
    )
    assert latest[12]["n"] == Decimal("9999999999.99") and latest[4]["t"] is None and latest[3]["t"] == ""
