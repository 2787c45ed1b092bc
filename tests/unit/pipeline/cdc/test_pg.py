"""Change data capture from a real PostgreSQL log (``wal_level=logical``, a private server): the
pgoutput decoder reads the bytes the server sends, and a flow's runs on Spark deliver a snapshot and
then each insert, update and delete once — into a change log of files and merged by key into a
PostgreSQL table that matches the source row by row."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.cdc import fanout as cdc_fanout
from portal.pipeline.cdc import pg as cdc_pg
from portal.pipeline.cdc.pgoutput import DELETE, INSERT, UPDATE, Decoder, format_lsn, parse_lsn
from portal.pipeline.sources.cdc import acknowledge
from tests.pg_logical import logical_pg, own_database  # noqa: F401 (fixture)

from ..helpers import read, run_and_publish, spec

CDC = "portal.pipeline.sources.cdc.CdcSource"


@pytest.fixture
def shop(logical_pg: str) -> Iterator[dict[str, Any]]:  # noqa: F811
    """A database of its own on the private server, with ``shop.customers``."""
    with own_database(
        logical_pg,
        "CREATE SCHEMA shop",
        "CREATE TABLE shop.customers (id int PRIMARY KEY, name text, balance numeric(10,2),"
        " seen timestamptz, vip boolean)",
        "INSERT INTO shop.customers SELECT g, 'c' || g, g * 1.25, TIMESTAMPTZ '2026-01-02 03:04:05+00', g % 2 = 0"
        " FROM generate_series(1, 5) g",
    ) as found:
        yield found


def test_the_decoder_reads_what_the_server_sends(shop):
    db = shop["db"]
    assert cdc_pg.ensure(db, "fp_cdc_decoder", ["shop.customers"], "node 'shop'") is True
    assert cdc_pg.ensure(db, "fp_cdc_decoder", ["shop.customers"], "node 'shop'") is False  # once
    with db.transaction():
        db.execute("INSERT INTO shop.customers VALUES (6, 'Zoë', 7.50, NULL, true)")
        db.execute("UPDATE shop.customers SET name = 'c1 renamed' WHERE id = 1")
    db.execute("DELETE FROM shop.customers WHERE id = 2")
    upto = cdc_pg.flushed(db)

    messages = list(cdc_pg.peek(db, "fp_cdc_decoder", upto, None))
    first, second = list(Decoder().transactions(m for _, m in messages))
    assert [(c.op, c.relation.qualified, c.values["id"]) for c in first.changes] == [
        (INSERT, "shop.customers", "6"),
        (UPDATE, "shop.customers", "1"),
    ]
    assert first.changes[0].values == {"id": "6", "name": "Zoë", "balance": "7.50", "seen": None, "vip": "t"}
    assert first.changes[1].values["name"] == "c1 renamed" and first.changes[1].values["balance"] == "1.25"
    assert [c.op for c in second.changes] == [DELETE]
    assert second.changes[0].values == {"id": "2", "name": None, "balance": None, "seen": None, "vip": None}
    assert [c.key for c in first.changes[0].relation.columns] == [True, False, False, False, False]
    assert first.end_lsn < second.end_lsn <= upto
    assert abs(first.commit_time - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=5)
    # Peeking does not consume: the same messages come again until the slot is advanced.
    assert list(cdc_pg.peek(db, "fp_cdc_decoder", upto, None)) == messages
    assert cdc_pg.advance(db, "fp_cdc_decoder", first.end_lsn) is True
    again = list(Decoder().transactions(m for _, m in cdc_pg.peek(db, "fp_cdc_decoder", upto, None)))
    assert [t.xid for t in again] == [second.xid]
    assert cdc_pg.advance(db, "fp_cdc_decoder", first.end_lsn) is False  # never backwards
    assert parse_lsn(format_lsn(upto)) == upto
    assert cdc_pg.drop(db, "fp_cdc_decoder") == ["slot fp_cdc_decoder", "publication fp_cdc_decoder"]
    assert cdc_pg.drop(db, "fp_cdc_decoder") == []


def _props(shop: dict[str, Any], tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "source.class": CDC,
        "source.jdbc.url": shop["url"],
        "source.cdc.tables": "shop.customers",
        "source.conn.username": "postgres",
        "writer.output.format": "parquet",
        "data.publisher.final.dir": str(tmp_path / "out"),
        **extra,
    }


def _changes(spark: SparkSession, tmp_path: Path) -> list[tuple[Any, ...]]:
    df = read(spark, tmp_path / "out" / "shop.customers")
    return sorted((r["_cdc_position"], r["_cdc_op"], r["id"], r["name"]) for r in df.collect())


def test_a_change_log_holds_the_snapshot_then_each_change_once(spark, shop, tmp_path):
    job = spec(tmp_path, _props(shop, tmp_path), flow_id=7)
    marks: dict[str, str] = {}
    states = run_and_publish(spark, job, marks)
    assert [s.get("error") for s in states] == [None], states
    first = _changes(spark, tmp_path)
    assert [(op, i) for _, op, i, _ in first] == [("r", i) for i in range(1, 6)]
    snapshot_mark = marks["shop.customers"]
    df = read(spark, tmp_path / "out" / "shop.customers")
    assert dict(df.dtypes)["balance"] == "decimal(10,2)" and dict(df.dtypes)["vip"] == "boolean"
    row = df.where("id = 2").selectExpr("balance", "vip", "unix_timestamp(seen) AS seen").first()
    instant = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC).timestamp()
    assert (row["balance"], row["vip"], row["seen"]) == (Decimal("2.50"), True, instant)

    db = shop["db"]
    db.execute("INSERT INTO shop.customers VALUES (6, 'c6', 1, NULL, false)")
    db.execute("UPDATE shop.customers SET name = 'c3 moved' WHERE id = 3")
    db.execute("DELETE FROM shop.customers WHERE id = 4")
    # A run that dies before its commit (its output is never published) reads the same changes again.
    job["execution_id"] = 2
    job["previous_watermarks"] = dict(marks)
    run_job(spark, job)
    job["execution_id"] = 3
    run_and_publish(spark, job, marks)
    changes = _changes(spark, tmp_path)[5:]
    assert [(op, i, n) for _, op, i, n in changes] == [("c", 6, "c6"), ("u", 3, "c3 moved"), ("d", 4, None)]
    assert cdc_pg.parse_lsn(marks["shop.customers"]) > cdc_pg.parse_lsn(snapshot_mark)

    # The slot still holds the log of run 3 (peek never consumes); run 4 releases it, and reads nothing again.
    slot = cdc_pg.slot_name(7, "tests", "pipeline")
    before = cdc_pg.state(db, slot)
    assert before is not None and before.confirmed < cdc_pg.parse_lsn(marks["shop.customers"])
    job["execution_id"] = 4
    run_and_publish(spark, job, marks)
    after = cdc_pg.state(db, slot)
    assert after is not None and after.confirmed == cdc_pg.parse_lsn(_previous(job))
    assert len(_changes(spark, tmp_path)) == 8

    # The worker acknowledges right after the publish: the slot moves to what was just committed.
    db.execute("UPDATE shop.customers SET name = 'c1 again' WHERE id = 1")
    job["execution_id"] = 5
    run_and_publish(spark, job, marks)
    assert cdc_pg.state(db, slot).confirmed < cdc_pg.parse_lsn(marks["shop.customers"])  # type: ignore[union-attr]
    assert acknowledge(job, {"shop.customers": marks["shop.customers"]}) is True
    assert cdc_pg.state(db, slot).confirmed == cdc_pg.parse_lsn(marks["shop.customers"])  # type: ignore[union-attr]
    assert acknowledge(job, {"shop.customers": marks["shop.customers"]}) is False  # never twice, never back
    assert acknowledge(job, {"shop.customers": snapshot_mark}) is False
    job["execution_id"] = 6
    run_and_publish(spark, job, marks)  # reads nothing again
    assert [(op, i, n) for _, op, i, n in _changes(spark, tmp_path)[8:]] == [("u", 1, "c1 again")]


def _previous(job: dict[str, Any]) -> str:
    return str(job["previous_watermarks"]["shop.customers"])


def test_a_postgresql_table_follows_the_source_row_by_row(spark, shop, tmp_path, pg, pg_database):
    target = f"cdc_customers_{uuid.uuid4().hex[:6]}"
    props = _props(
        shop,
        tmp_path,
        **{
            "writer.output.format": "jdbc",
            "writer.jdbc.url": pg_database["url"],
            "writer.jdbc.username": pg_database["user"],
            "writer.jdbc.table": target,
            "writer.write.mode": "merge",
            "extract.primary.key.fields": "id",
            "extract.delta.fields": "_cdc_position",
            "writer.merge.delete.column": "_cdc_deleted",
        },
    )
    job = spec(tmp_path, props, flow_id=8)
    marks: dict[str, str] = {}
    db = shop["db"]
    for execution, statements in enumerate(
        [
            [],
            [
                "INSERT INTO shop.customers VALUES (6, 'c6', 1, NULL, false)",
                "DELETE FROM shop.customers WHERE id = 1",
            ],
            [
                "UPDATE shop.customers SET balance = balance + 1, vip = NOT vip",
                "INSERT INTO shop.customers VALUES (1, 'c1 is back', 0, now(), NULL)",
                "UPDATE shop.customers SET name = 'twice' WHERE id = 6",
                "DELETE FROM shop.customers WHERE id = 6",
            ],
            [  # rows moved to other keys, one of them back where another row was deleted
                "UPDATE shop.customers SET id = 20 WHERE id = 2",
                "BEGIN; DELETE FROM shop.customers WHERE id = 3; UPDATE shop.customers SET id = 3 WHERE id = 4;"
                " UPDATE shop.customers SET id = 21, name = 'moved twice' WHERE id = 3; COMMIT",
            ],
        ],
        start=1,
    ):
        for statement in statements:
            db.execute(statement)
        job["execution_id"] = execution
        states = run_and_publish(spark, job, marks)
        assert states[0]["fork_feed"] == "direct"  # the log's text copied as it is (destinations.directcopy)
        columns = "id, name, balance, seen, vip"
        source = db.execute(f"SELECT {columns} FROM shop.customers ORDER BY id").fetchall()  # noqa: S608
        copied = pg.execute(f"SELECT {columns} FROM {target} ORDER BY id").fetchall()  # noqa: S608
        assert copied == source, execution


def test_a_column_added_at_the_source_reaches_the_table_under_the_evolve_policy(
    spark, shop, tmp_path, pg, pg_database
):
    target = f"cdc_evolve_{uuid.uuid4().hex[:6]}"
    props = _props(
        shop,
        tmp_path,
        **{
            "writer.output.format": "jdbc",
            "writer.jdbc.url": pg_database["url"],
            "writer.jdbc.username": pg_database["user"],
            "writer.jdbc.table": target,
            "writer.write.mode": "merge",
            "extract.primary.key.fields": "id",
            "extract.delta.fields": "_cdc_position",
            "writer.merge.delete.column": "_cdc_deleted",
            "schema.evolution.policy": "evolve",
        },
    )
    job = spec(tmp_path, props, flow_id=10)
    # Executions of their own: the publish markers of the other stories' runs share this database.
    job["execution_id"] = 101
    marks: dict[str, str] = {}
    run_and_publish(spark, job, marks)
    db = shop["db"]
    db.execute("UPDATE shop.customers SET name = 'before the change' WHERE id = 1")  # logged without coupon
    db.execute("ALTER TABLE shop.customers ADD COLUMN coupon text")
    db.execute("INSERT INTO shop.customers VALUES (6, 'c6', 1, NULL, false, 'SPRING')")
    db.execute("UPDATE shop.customers SET coupon = 'VIP' WHERE vip")
    job["execution_id"] = 102
    states = run_and_publish(spark, job, marks)
    assert [s.get("error") for s in states] == [None], states
    columns = "id, name, balance, seen, vip, coupon"
    source = db.execute(f"SELECT {columns} FROM shop.customers ORDER BY id").fetchall()  # noqa: S608
    copied = pg.execute(f"SELECT {columns} FROM {target} ORDER BY id").fetchall()  # noqa: S608
    assert copied == source and {r[5] for r in copied} == {None, "SPRING", "VIP"}


def test_a_slot_gone_from_the_server_stops_the_flow_until_the_user_asks_for_a_new_snapshot(
    spark, shop, tmp_path
):
    job = spec(tmp_path, _props(shop, tmp_path), flow_id=11)
    marks: dict[str, str] = {}
    run_and_publish(spark, job, marks)
    db, slot = shop["db"], cdc_pg.slot_name(11, "tests", "pipeline")
    db.execute("SELECT pg_drop_replication_slot(%s)", (slot,))  # a DBA cleans up
    db.execute("DELETE FROM shop.customers WHERE id = 5")
    job["execution_id"] = 2
    states = run_and_publish(spark, job, marks)
    assert f"replication slot {slot} is missing while the tables have positions" in states[0]["error"]
    assert "Ask for a new snapshot" in states[0]["error"] and len(_changes(spark, tmp_path)) == 5

    job["execution_id"], job["properties"]["source.cdc.resnapshot"] = 3, "true"
    run_and_publish(spark, job, marks)
    again = [(op, i) for _, op, i, _ in _changes(spark, tmp_path)]
    assert again.count(("r", 4)) == 2 and again.count(("r", 5)) == 1  # read whole again: 5 is gone
    assert cdc_pg.state(db, slot) is not None

    del job["properties"]["source.cdc.resnapshot"]
    db.execute("TRUNCATE shop.customers")
    job["execution_id"] = 4
    states = run_and_publish(spark, job, marks)
    assert "shop.customers was truncated on the server" in states[0]["error"]


def test_a_slot_the_server_lost_fails_runs_until_the_positions_are_cleared_then_snapshots_again(
    spark, shop, tmp_path
):
    """``max_slot_wal_keep_size`` lets the server drop the log a slot needs (``wal_status = lost``):
    runs fail saying so and read nothing; once the user asks for a new snapshot (the portal clears
    the tables' positions), the run drops the lost slot, makes a new one and reads the tables whole."""
    job = spec(tmp_path, _props(shop, tmp_path), flow_id=12)
    marks: dict[str, str] = {}
    run_and_publish(spark, job, marks)
    db, slot = shop["db"], cdc_pg.slot_name(12, "tests", "pipeline")
    db.execute("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'")
    db.execute("SELECT pg_reload_conf()")
    try:
        db.execute("DELETE FROM shop.customers WHERE id = 5")
        for _ in range(3):  # three log segments, then a checkpoint: the slot's log is removed
            db.execute("CREATE TABLE IF NOT EXISTS shop.filler (v text)")
            db.execute("INSERT INTO shop.filler SELECT repeat('x', 100) FROM generate_series(1, 20000)")
            db.execute("SELECT pg_switch_wal()")
        db.execute("CHECKPOINT")
        lost = cdc_pg.state(db, slot)
        assert lost is not None and lost.wal_status == "lost" and lost.safe_wal_bytes is None
        job["execution_id"] = 2
        states = run_and_publish(spark, job, marks)
        assert f"replication slot {slot} was lost on the server" in states[0]["error"]
        assert "Ask for a new snapshot" in states[0]["error"] and len(_changes(spark, tmp_path)) == 5

        marks.clear()  # what the portal's "Take a new snapshot" does to the tables' positions
        job["execution_id"] = 3
        states = run_and_publish(spark, job, marks)
        assert [s.get("error") for s in states] == [None], states
        again = [(op, i) for _, op, i, _ in _changes(spark, tmp_path)]
        assert again.count(("r", 4)) == 2 and again.count(("r", 5)) == 1  # read whole again: 5 is gone
        fresh = cdc_pg.state(db, slot)
        assert fresh is not None and fresh.wal_status != "lost"
    finally:
        db.execute("ALTER SYSTEM RESET max_slot_wal_keep_size")
        db.execute("SELECT pg_reload_conf()")


def test_a_destination_ahead_of_the_slot_goes_on_under_max_changes(spark, shop, tmp_path):
    """Another destination of the flow holds the slot back at the snapshot; this one, bounded by
    source.cdc.max.changes, still moves on run after run instead of re-reading what it has."""
    job = spec(tmp_path, _props(shop, tmp_path, **{"source.cdc.max.changes": "6"}), flow_id=11)
    marks: dict[str, str] = {}
    run_and_publish(spark, job, marks)
    held = marks["shop.customers"]
    job[cdc_fanout.OTHERS_KEY] = {"tests.pipeline.other-destination": {"shop.customers": held}}
    for i in range(6, 16):  # ten transactions of one insert: three messages each
        shop["db"].execute(f"INSERT INTO shop.customers VALUES ({i}, 'c{i}', 1, NULL, false)")  # noqa: S608
    seen = []
    for execution in range(2, 7):
        job["execution_id"] = execution
        run_and_publish(spark, job, marks)
        seen.append([i for _, op, i, _ in _changes(spark, tmp_path) if op == "c"])
    slot = cdc_pg.state(shop["db"], cdc_pg.slot_name(11, "tests", "pipeline"))
    assert slot is not None and slot.confirmed <= cdc_pg.parse_lsn(held)  # held by the other destination
    counts = [0] + [len(ids) for ids in seen]
    steps = [after - before for before, after in itertools.pairwise(counts)]
    assert all(0 < step <= 6 for step in steps[:3]), steps  # every run goes on, at most max.changes
    assert seen[-1] == list(range(6, 16)) and all(len(set(ids)) == len(ids) for ids in seen)
