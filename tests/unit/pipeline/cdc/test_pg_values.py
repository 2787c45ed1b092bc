"""Every value arrives as it left, change data capture from PostgreSQL (snapshot and log) into a
PostgreSQL table merged by key and a Parquet change log: integers at their limits, numeric at its
precision's edge and unconstrained, NaN and infinities, text with quotes, newlines, tabs,
backslashes, emoji, CJK and the literal strings NULL and \\N, empty against NULL, bytea with every
byte, dates before 1970 and after 2038, timestamps with and without a time zone (offsets -12 to
+14, microseconds), time, interval, uuid, json, jsonb and arrays. A created PostgreSQL table has the
source's column types; Parquet has a type that holds each value, or the value's text (README,
"Types")."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.builders.props import change_log_merged_into
from tests.pg_logical import logical_pg, own_database  # noqa: F401 (fixture)
from tests.values import COLUMNS, PARQUET, ROWS, assert_same_row, column_types, create_sql, texts

from ..helpers import data_files, run_and_publish, spec

CDC = "portal.pipeline.sources.cdc.CdcSource"


@pytest.fixture
def source(logical_pg: str) -> Iterator[dict[str, Any]]:  # noqa: F811
    with own_database(logical_pg, "CREATE SCHEMA shop", create_sql("shop.v")) as found:
        found["db"].execute(f"INSERT INTO shop.v VALUES {ROWS[0]}, {ROWS[1]}")  # noqa: S608
        yield found


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
            **change_log_merged_into(pg_database["url"], pg_database["user"], target),
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
    kinds, source_kinds = column_types(pg, target), column_types(db, "shop.v")
    # json has no equality operator, which a history's merge compares by: its text, as written
    assert kinds == source_kinds | {"j": "text"}

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
        assert_same_row(row, want[key], text[key], PARQUET)
    assert latest[11]["b"] == bytes(range(256)) + b"\x00" and latest[11]["t"].endswith(
        "slash\nnew\ttab again"
    )
    assert latest[12]["n"] == Decimal("9999999999.99") and latest[4]["t"] is None and latest[3]["t"] == ""
