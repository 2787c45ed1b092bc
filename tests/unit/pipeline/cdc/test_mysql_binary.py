"""MariaDB binary columns (BLOB, VARBINARY, BINARY: charset 63) arrive through change data capture
byte for byte: every byte value, NUL, bytes that are not UTF-8 and the empty value, read by the
snapshot (in key chunks, and whole for a table without a key) and from the binlog, into Parquet
files (binary) and merged into PostgreSQL (bytea) and MariaDB (BLOB). Text columns beside them
stay text."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pymysql
import pytest

from tests.builders.props import change_log_merged_into
from tests.builders.servers import MYSQL_HOST, MYSQL_PORT
from tests.mariadb_binlog import binlog_mariadb, own_schema  # noqa: F401 (fixture)

from ..helpers import data_files, run_and_publish, spec

CDC = "portal.pipeline.sources.cdc.CdcSource"
COLUMNS = ("id", "b", "vb", "fixed", "note")
ROWS: list[tuple[Any, ...]] = [
    (1, bytes(range(256)), bytes(range(255, -1, -1)), b"\x00\x00\x00", "é, 中文 and 🙂"),
    (2, b"\x00", b"\xff\xfe\x80\xc3(", b"a\x00b", None),
    (3, b"", None, b"\xff\x00\x00", ""),
    (4, None, b"\x00a\x00", None, "NULL"),
    *[(100 + i, bytes([i]), bytes([i, 0, i]), bytes([i, i, i]), chr(65 + i % 26)) for i in range(256)],
]


@pytest.fixture
def store(binlog_mariadb: dict[str, Any]) -> Iterator[dict[str, Any]]:  # noqa: F811
    table = "({} int {}, b blob, vb varbinary(300), fixed binary(3), note text) CHARACTER SET utf8mb4"
    with own_schema(
        binlog_mariadb,
        "CREATE TABLE {db}.blobs " + table.format("id", "PRIMARY KEY"),
        "CREATE TABLE {db}.blob_log " + table.format("id", "NOT NULL"),
    ) as found:
        insert(found, ROWS)
        yield found


def insert(store: dict[str, Any], rows: list[tuple[Any, ...]], offset: int = 0) -> None:
    with store["conn"].cursor() as cur:
        for table in ("blobs", "blob_log"):
            cur.executemany(
                f"INSERT INTO `{store['name']}`.{table} VALUES (%s, %s, %s, %s, %s)",  # noqa: S608
                [(r[0] + offset, *r[1:]) for r in rows],
            )


def source_rows(store: dict[str, Any], table: str) -> list[tuple[Any, ...]]:
    with store["conn"].cursor() as cur:
        cur.execute(f"SELECT {', '.join(COLUMNS)} FROM `{store['name']}`.{table} ORDER BY id")  # noqa: S608
        return [tuple(r) for r in cur.fetchall()]


def replayed(folder: Path) -> tuple[pa.Schema, list[tuple[Any, ...]]]:
    """The change log in Parquet replayed by key: the table it describes, and its schema."""
    log = pa.concat_tables([pq.read_table(p) for p in data_files(folder)]).to_pylist()
    table: dict[int, tuple[Any, ...]] = {}
    for row in sorted(log, key=lambda r: r["_cdc_position"]):
        if row["_cdc_op"] == "d":
            table.pop(row["id"], None)
        else:
            table[row["id"]] = tuple(row[c] for c in COLUMNS)
    return pq.read_schema(data_files(folder)[0]), [table[k] for k in sorted(table)]


def test_binary_columns_arrive_byte_for_byte_in_parquet_and_postgresql_and_mariadb_merges(
    spark, store, tmp_path: Path, pg, pg_database, mysql_database
):
    db = store["name"]
    files = spec(
        tmp_path / "files",
        {
            "source.class": CDC,
            "source.jdbc.url": store["url"],
            "source.conn.username": "root",
            "source.cdc.tables": f"{db}.blobs,{db}.blob_log",
            "source.cdc.snapshot.chunk.size": "100",  # the key-chunked snapshot, several chunks
            "writer.output.format": "parquet",
            "data.publisher.final.dir": str(tmp_path / "out"),
        },
        flow_id=31,
    )
    target = f"cdc_blobs_{uuid.uuid4().hex[:6]}"
    merged = spec(
        tmp_path / "merged",
        {
            "source.class": CDC,
            "source.jdbc.url": store["url"],
            "source.conn.username": "root",
            "source.cdc.tables": f"{db}.blobs",
            **change_log_merged_into(pg_database["url"], pg_database["user"], target),
        },
        flow_id=32,
        job_name="merged",
    )
    into_mariadb = spec(
        tmp_path / "into_mariadb",
        {
            **merged["properties"],
            "writer.jdbc.url": mysql_database["url"],
            "writer.jdbc.username": mysql_database["user"],
        },
        flow_id=33,
        job_name="into_mariadb",
    )
    marks: dict[str, dict[str, str]] = {"files": {}, "merged": {}, "into_mariadb": {}}
    for execution in (1, 2):
        for name, job in (("files", files), ("merged", merged), ("into_mariadb", into_mariadb)):
            job["execution_id"] = 200 + execution
            states = run_and_publish(spark, job, marks[name])
            assert [s.get("error") for s in states] == [None] * len(states), states
        if execution == 1:  # the same bytes again from the binlog, and updates and deletes
            insert(store, ROWS, offset=1000)
            with store["conn"].cursor() as cur:
                for table in ("blobs", "blob_log"):
                    cur.execute(
                        f"UPDATE `{db}`.{table} SET b = %s, vb = b WHERE id IN (2, 1003)",  # noqa: S608
                        (b"\x00\xff" * 150,),
                    )
                    cur.execute(f"DELETE FROM `{db}`.{table} WHERE id IN (3, 1001)")  # noqa: S608

    for table in ("blobs", "blob_log"):
        schema, rows = replayed(tmp_path / "out" / f"{db}.{table}")
        assert [schema.field(c).type for c in COLUMNS] == [pa.int32(), *[pa.binary()] * 3, pa.string()]
        expected = source_rows(store, table)
        assert len(expected) == 2 * len(ROWS) - 2
        assert rows == expected, [(a, b) for a, b in zip(rows, expected, strict=True) if a != b][:3]

    copied = pg.execute(f"SELECT {', '.join(COLUMNS)} FROM {target} ORDER BY id").fetchall()  # noqa: S608
    assert copied == source_rows(store, "blobs")
    kinds = pg.execute(
        "SELECT data_type FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
        (target,),
    ).fetchall()
    assert [k[0] for k in kinds[1:4]] == ["bytea"] * 3

    mariadb = pymysql.connect(
        host=MYSQL_HOST, port=MYSQL_PORT, user="root", password="", database=mysql_database["db"]
    )
    with mariadb, mariadb.cursor() as cur:
        cur.execute(f"SELECT {', '.join(COLUMNS)} FROM `{target}` ORDER BY id")  # noqa: S608
        assert [tuple(r) for r in cur.fetchall()] == source_rows(store, "blobs")
        cur.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_schema = %s AND table_name = %s"
            " ORDER BY ordinal_position",
            (mysql_database["db"], target),
        )
        assert [r[0] for r in cur.fetchall()][1:4] == ["longblob"] * 3  # a BLOB ends at 64 KiB
