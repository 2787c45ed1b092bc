"""A MariaDB ``BIT(n)`` arrives through change data capture as its ``n`` binary digits, the same
from the snapshot (chunked by key, and whole for a table without a key) as from the binlog: the
SQL client sends a BIT as raw bytes, the binlog as digits, and a change log mixing the two would
hold one value in two spellings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.mariadb_binlog import binlog_mariadb, own_schema  # noqa: F401 (fixture)

from ..helpers import data_files, run_and_publish, spec

CDC = "portal.pipeline.sources.cdc.CdcSource"
# (id, flags BIT(10), one BIT(1), wide BIT(64))
FIRST = [(1, 0, 0, 0), (2, 0b1000000001, 1, 2**64 - 1), (3, 5, None, 2**63), (4, None, 1, 1)]
LATER = [(11, 0b0111111110, 0, 12345678901234567), (12, 1023, 1, None)]


def digits(value: int | None, width: int) -> str | None:
    return None if value is None else format(value, f"0{width}b")


def as_read(rows: list[tuple[Any, ...]]) -> dict[int, tuple[Any, ...]]:
    return {r[0]: (digits(r[1], 10), digits(r[2], 1), digits(r[3], 64)) for r in rows}


@pytest.fixture
def store(binlog_mariadb: dict[str, Any]) -> Iterator[dict[str, Any]]:  # noqa: F811
    table = "(id int {}, flags bit(10), one bit(1), wide bit(64))"
    with own_schema(
        binlog_mariadb,
        "CREATE TABLE {db}.bits " + table.format("PRIMARY KEY"),
        "CREATE TABLE {db}.bit_log " + table.format("NOT NULL"),
    ) as found:
        insert(found, FIRST)
        yield found


def insert(store: dict[str, Any], rows: list[tuple[Any, ...]]) -> None:
    with store["conn"].cursor() as cur:
        for table in ("bits", "bit_log"):
            cur.executemany(
                f"INSERT INTO `{store['name']}`.{table} VALUES (%s, %s, %s, %s)",  # noqa: S608
                rows,
            )


def test_bit_columns_read_the_same_from_the_snapshot_and_the_binlog(spark, store, tmp_path: Path):
    db = store["name"]
    job = spec(
        tmp_path / "work",
        {
            "source.class": CDC,
            "source.jdbc.url": store["url"],
            "source.conn.username": "root",
            "source.cdc.tables": f"{db}.bits,{db}.bit_log",
            "source.cdc.snapshot.chunk.size": "2",  # several key chunks
            "writer.output.format": "parquet",
            "data.publisher.final.dir": str(tmp_path / "out"),
        },
        flow_id=41,
    )
    marks: dict[str, str] = {}
    for execution in (1, 2):
        job["execution_id"] = 300 + execution
        states = run_and_publish(spark, job, marks)
        assert [s.get("error") for s in states] == [None] * len(states), states
        if execution == 1:  # the next rows come from the binlog
            insert(store, LATER)

    for table in ("bits", "bit_log"):
        files = data_files(tmp_path / "out" / f"{db}.{table}")
        log = pa.concat_tables([pq.read_table(p) for p in files]).to_pylist()
        read = {r["id"]: (r["flags"], r["one"], r["wide"]) for r in log}
        assert pq.read_schema(files[0]).field("flags").type == pa.string()
        assert read == as_read(FIRST + LATER), table
