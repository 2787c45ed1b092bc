"""PostgreSQL's text cannot hold the NUL character, which a file or a MariaDB TEXT may: a run
writing one into a PostgreSQL table fails naming the column, and the table keeps what it had
(where the server would say only "invalid byte sequence for encoding UTF8: 0x00")."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from tests.unit.pipeline.helpers import NOW, run_and_publish, spec


def _land(folder: Path, notes: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table({"id": list(range(1, len(notes) + 1)), "note": notes})
    pq.write_table(table, folder / "part.parquet")
    os.utime(folder / "part.parquet", (NOW - 60, NOW - 60))


def _props(tmp_path: Path, pg_database: dict[str, Any]) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "parquet",
        "writer.output.format": "jdbc",
        "writer.jdbc.url": pg_database["url"],
        "writer.jdbc.username": pg_database["user"],
        "writer.jdbc.table": "nul_notes",
        "writer.write.mode": "overwrite",
    }


def test_a_text_with_nul_fails_the_run_naming_its_column_and_leaves_the_table(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    pg.execute("DROP TABLE IF EXISTS nul_notes")
    _land(tmp_path / "first" / "landing" / "notes", ["plain", "also plain"])
    first = run_and_publish(spark, spec(tmp_path / "first", _props(tmp_path / "first", pg_database)), {})
    assert [s.get("error") for s in first] == [None], first

    _land(tmp_path / "second" / "landing" / "notes", ["fine", "a\x00b"])
    props = _props(tmp_path / "second", pg_database)
    states = run_and_publish(spark, spec(tmp_path / "second", props, execution_id=2), {})
    errors = " ".join(s.get("error") or "" for s in states)
    assert "column 'note' holds a text with the NUL character (0x00)" in errors, errors
    assert "invalid byte sequence" not in errors
    rows = pg.execute("SELECT id, note FROM nul_notes ORDER BY id").fetchall()
    assert rows == [(1, "plain"), (2, "also plain")]  # the overwrite never happened
