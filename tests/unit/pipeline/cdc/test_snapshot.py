"""A captured table's first read in key-ordered chunks over several runs, on the real private servers
(PostgreSQL with ``wal_level=logical``, MariaDB with a row-based binlog): while a writer keeps
inserting, updating and deleting rows all through the snapshot, and a run dies before its commit in
the middle of it, the destination ends up equal to the source row by row, each change once, and the
slot is released after every run of the snapshot."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pymysql
import pytest

from portal.pipeline import run_job
from portal.pipeline.cdc import pg as cdc_pg
from portal.pipeline.cdc import snapshot as cdc_snapshot
from portal.pipeline.cdc.pgoutput import parse_lsn
from portal.pipeline.cdc.snapshot import Progress, join, split, stream_position
from portal.pipeline.sources.cdc import _META, acknowledge
from tests.mariadb_binlog import binlog_mariadb, own_schema  # noqa: F401 (fixture)
from tests.pg_logical import logical_pg, own_database  # noqa: F401 (fixture)

from ..helpers import read, run_and_publish, spec

CDC = "portal.pipeline.sources.cdc.CdcSource"
CHUNKS = {"source.cdc.snapshot.chunk.size": "8", "source.cdc.snapshot.chunks.per.run": "2"}


def test_a_snapshot_in_progress_is_written_into_the_watermark_and_read_back():
    assert split("0/16B3748") == ("0/16B3748", None)
    assert split(None) == (None, None)
    mark = join("0/16B3748", Progress(("41", None), 80))
    assert mark == '0/16B3748 snapshot {"after":["41",null],"rows":80}'
    assert split(mark) == ("0/16B3748", Progress(("41", None), 80))
    assert stream_position(mark) == "0/16B3748"
    assert join("gtid:0-1-9", Progress()) == 'gtid:0-1-9 snapshot {"after":null,"rows":0}'
    assert split(join("gtid:0-1-9", Progress())) == ("gtid:0-1-9", Progress())
    assert join("gtid:0-1-9", None) == "gtid:0-1-9"
    with pytest.raises(ValueError, match="not a snapshot's progress"):
        split("0/1 snapshot {broken")


def test_a_chunk_row_whose_key_the_log_shows_newer_is_dropped(tmp_path: Path):
    """The window rule on its own: a change the chunk's read did not see (here: a change at log
    place 7, inside the window) drops its key's chunk row; older changes and other keys keep theirs;
    a chunk shorter than the chunk size ends the snapshot."""
    schema = pa.schema([("id", pa.string()), ("name", pa.string()), *_META])
    staged = cdc_snapshot.Staged(str(tmp_path / "t.chunks.parquet"), schema, [0], Progress())
    rows = [("1", "a"), ("2", "b"), ("3", "c")]
    chunk = cdc_snapshot.Chunk(
        rows, [(r[0],) for r in rows], "00000000000000A0", lambda at, _x: 5 < at <= 9, 4
    )
    staged.add(chunk, "r")
    staged.saw(("2", "b2"), 7)  # newer than the read: the change carries the row
    staged.saw(("3", "c0"), 4)  # seen by the read: the chunk row stays
    staged.saw(("9", "z"), 8)  # a key of no chunk
    kept = [b.to_pylist() for b in staged.rows_kept()]
    assert [(r["id"], r["name"], r["_cdc_position"]) for batch in kept for r in batch] == [
        ("1", "a", "00000000000000A0:S000000000000"),
        ("3", "c", "00000000000000A0:S000000000002"),
    ]
    assert staged.done and staged.watermark("0/A0") == "0/A0"
    assert staged.progress == Progress(("3",), 3)


def churn(
    execute: Callable[[str, tuple[Any, ...]], None], stop: threading.Event, upsert: str, pause: float = 0.002
) -> int:
    """Random inserts, updates and deletes over the key range until told to stop; how many. Keys
    that are multiples of 5 are never touched: only the snapshot brings them."""
    rnd, done = random.Random(36), 0
    while not stop.is_set():
        key, pick = rnd.randint(1, 90), rnd.random()
        if key % 5 == 0:
            continue
        if pick < 0.45:
            execute("UPDATE shop.items SET n = n + 1, name = %s WHERE id = %s", (f"u{done}", key))
        elif pick < 0.65:
            execute("DELETE FROM shop.items WHERE id = %s", (key,))
        else:
            execute(upsert, (key, f"i{done}"))
        done += 1
        time.sleep(pause)
    return done


def replay(log: list[Any]) -> list[tuple[Any, ...]]:
    table: dict[int, tuple[Any, ...]] = {}
    for row in sorted(log, key=lambda r: r["_cdc_position"]):
        if row["_cdc_op"] == "d":
            table.pop(row["id"], None)
        else:
            table[row["id"]] = (row["id"], row["name"], row["n"])
    return [table[k] for k in sorted(table)]


def snapshot_runs(
    spark: Any, job: dict[str, Any], table: str, marks: dict[str, str], after_commit: Callable[[], None]
) -> list[Progress]:
    """Run the flow until its snapshot is done; the second run dies before its commit (nothing
    published, nothing stored) and the next goes on from the last committed chunk."""
    seen: list[Progress] = []
    for execution in range(1, 30):
        job["execution_id"] = execution
        if execution == 2:
            run_job(spark, dict(job, previous_watermarks=dict(marks)))  # dies before its commit
            continue
        states = run_and_publish(spark, job, marks)
        assert [s.get("error") for s in states] == [None], states
        after_commit()
        _, progress = split(marks[table])
        if progress is None:
            return seen
        seen.append(progress)
    raise AssertionError(f"the snapshot did not end: {marks}")


@pytest.fixture
def pg_shop(logical_pg: str) -> Iterator[dict[str, Any]]:  # noqa: F811
    with own_database(
        logical_pg,
        "CREATE SCHEMA shop",
        "CREATE TABLE shop.items (id int PRIMARY KEY, name text, n int)",
        "INSERT INTO shop.items SELECT g, 'c' || g, g FROM generate_series(1, 60) g",
    ) as found:
        yield found


def test_a_postgresql_table_is_snapshotted_in_chunks_over_runs_while_it_changes(
    spark, pg_shop, tmp_path: Path, pg, pg_database
):
    """Merged by key into a PostgreSQL table: equal to the source row by row at the end."""
    target = f"cdc_chunks_{uuid.uuid4().hex[:6]}"
    props = {
        "source.class": CDC,
        "source.jdbc.url": pg_shop["url"],
        "source.cdc.tables": "shop.items",
        "source.conn.username": "postgres",
        "writer.output.format": "jdbc",
        "writer.jdbc.url": pg_database["url"],
        "writer.jdbc.username": pg_database["user"],
        "writer.jdbc.table": target,
        "writer.write.mode": "merge",
        "extract.primary.key.fields": "id",
        "extract.delta.fields": "_cdc_position",
        "writer.merge.delete.column": "_cdc_deleted",
        **CHUNKS,
    }
    job = spec(tmp_path, props, flow_id=36)
    marks: dict[str, str] = {}
    slot = cdc_pg.slot_name(36, "tests", "pipeline")
    released: list[bool] = []

    def release() -> None:  # as the worker does after the publish: the slot follows the stream
        acknowledge(job, marks)
        found = cdc_pg.state(pg_shop["db"], slot)
        assert found is not None
        released.append(found.confirmed == parse_lsn(stream_position(marks["shop.items"]) or ""))

    stop = threading.Event()
    with psycopg.connect(pg_shop["conninfo"], autocommit=True) as writer:
        upsert = (
            "INSERT INTO shop.items VALUES (%s, %s, 0) ON CONFLICT (id) DO UPDATE SET n = shop.items.n + 100"
        )
        worker = threading.Thread(target=churn, args=(writer.execute, stop, upsert))
        worker.start()
        try:
            seen = snapshot_runs(spark, job, "shop.items", marks, release)
        finally:
            stop.set()
            worker.join()
    job["execution_id"] = 99  # the changes since the snapshot's last run
    run_and_publish(spark, job, marks)
    source = pg_shop["db"].execute("SELECT id, name, n FROM shop.items ORDER BY id").fetchall()
    copied = pg.execute(f"SELECT id, name, n FROM {target} ORDER BY id").fetchall()  # noqa: S608 - test name
    assert copied == source
    assert len(seen) >= 2 and [p.rows for p in seen] == sorted({p.rows for p in seen}), seen
    assert all(released), released
    assert split(marks["shop.items"])[1] is None


@pytest.fixture
def maria_shop(binlog_mariadb: dict[str, Any]) -> Iterator[dict[str, Any]]:  # noqa: F811
    with own_schema(
        binlog_mariadb,
        "CREATE TABLE {db}.items (id int PRIMARY KEY, name varchar(40), n int)",
        "INSERT INTO {db}.items VALUES " + ", ".join(f"({i}, 'c{i}', {i})" for i in range(1, 61)),  # noqa: S608 - test rows
    ) as found:
        yield found


def test_a_mariadb_table_is_snapshotted_in_chunks_over_runs_while_it_changes(
    spark, maria_shop, tmp_path: Path
):
    """Into a change log of files: replayed, it equals the source row by row, each change once."""
    name = maria_shop["name"]
    table = f"{name}.items"
    props = {
        "source.class": CDC,
        "source.jdbc.url": maria_shop["url"],
        "source.conn.username": "root",
        "source.cdc.tables": table,
        "writer.output.format": "parquet",
        "data.publisher.final.dir": str(tmp_path / "out"),
        **CHUNKS,
    }
    job = spec(tmp_path, props, flow_id=37)
    marks: dict[str, str] = {}
    stop = threading.Event()
    writer = pymysql.connect(**maria_shop["server"], password="", autocommit=True)

    def execute(statement: str, params: tuple[Any, ...]) -> None:
        with writer.cursor() as cur:
            cur.execute(statement.replace("shop.", f"`{name}`."), params)

    upsert = "INSERT INTO shop.items VALUES (%s, %s, 0) ON DUPLICATE KEY UPDATE n = n + 100"
    worker = threading.Thread(target=churn, args=(execute, stop, upsert, 0.03))
    worker.start()
    try:
        seen = snapshot_runs(spark, job, table, marks, lambda: None)
    finally:
        stop.set()
        worker.join()
        writer.close()
    job["execution_id"] = 99
    run_and_publish(spark, job, marks)
    log = read(spark, tmp_path / "out" / table).collect()
    with maria_shop["conn"].cursor() as cur:
        cur.execute(f"SELECT id, name, n FROM `{name}`.items ORDER BY id")  # noqa: S608 - test name
        source = [tuple(r) for r in cur.fetchall()]
    positions = [r["_cdc_position"] for r in log]
    assert len(positions) == len(set(positions))
    assert replay(log) == source
    assert len(seen) >= 2 and marks[table].startswith("gtid:") and split(marks[table])[1] is None
    assert any(r["_cdc_op"] == "r" for r in log) and any(r["_cdc_op"] == "d" for r in log)


def test_a_table_without_a_primary_key_is_read_whole_in_one_run(spark, pg_shop, tmp_path: Path):
    db = pg_shop["db"]
    db.execute("CREATE TABLE shop.notes (body text)")
    db.execute("INSERT INTO shop.notes SELECT 'n' || g FROM generate_series(1, 30) g")
    props = {
        "source.class": CDC,
        "source.jdbc.url": pg_shop["url"],
        "source.cdc.tables": "shop.notes",
        "source.conn.username": "postgres",
        "writer.output.format": "parquet",
        "data.publisher.final.dir": str(tmp_path / "out"),
        **CHUNKS,
    }
    job = spec(tmp_path, props, flow_id=38)
    marks: dict[str, str] = {}
    run_and_publish(spark, job, marks)
    log = read(spark, tmp_path / "out" / "shop.notes").collect()
    assert sorted(r["body"] for r in log) == sorted(f"n{i}" for i in range(1, 31))
    assert split(marks["shop.notes"])[1] is None  # no snapshot under way: the position only
    assert cdc_snapshot.pg_key(db, "shop.notes") == []
