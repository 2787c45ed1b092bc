"""Change data capture from a MariaDB binary log (a private server with ``binlog_format=ROW``): a
flow's first run delivers a consistent snapshot whose binlog position MariaDB gives, later runs each
insert, update and delete once — a run that died before its commit reads them again, a committed
one never — and replaying the change log gives the source table row by row."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from portal.pipeline import run_job
from portal.pipeline.cdc import mysql as cdc_mysql
from tests.mariadb_binlog import binlog_mariadb, own_schema  # noqa: F401 (fixture)

from ..helpers import read, run_and_publish, spec

CDC = "portal.pipeline.sources.cdc.CdcSource"


@pytest.fixture
def shop(binlog_mariadb: dict[str, Any]) -> Iterator[dict[str, Any]]:  # noqa: F811
    with own_schema(
        binlog_mariadb,
        "CREATE TABLE {db}.customers (id int PRIMARY KEY, name varchar(40), balance decimal(10,2))",
        "INSERT INTO {db}.customers VALUES (1, 'c1', 1.5), (2, 'c2', 3), (3, 'c3', 4.5)",
    ) as found:
        yield found


def run(shop: dict[str, Any], statement: str) -> None:
    with shop["conn"].cursor() as cur:
        cur.execute(statement.replace("shop.", f"`{shop['name']}`."))


def source_rows(shop: dict[str, Any]) -> list[tuple[Any, ...]]:
    with shop["conn"].cursor() as cur:
        cur.execute(f"SELECT id, name, balance FROM `{shop['name']}`.customers ORDER BY id")  # noqa: S608
        return [tuple(r) for r in cur.fetchall()]


def replay(log: list[Any]) -> list[tuple[Any, ...]]:
    table: dict[int, tuple[Any, ...]] = {}
    for row in sorted(log, key=lambda r: r["_cdc_position"]):
        if row["_cdc_op"] == "d":
            table.pop(row["id"], None)
        else:
            table[row["id"]] = (row["id"], row["name"], row["balance"])
    return [table[k] for k in sorted(table)]


def test_a_change_log_from_the_binlog_holds_each_change_once(spark, shop, tmp_path: Path):
    table = f"{shop['name']}.customers"
    props = {
        "source.class": CDC,
        "source.jdbc.url": shop["url"],
        "source.conn.username": "root",
        "source.cdc.tables": table,
        "writer.output.format": "parquet",
        "data.publisher.final.dir": str(tmp_path / "out"),
    }
    job = spec(tmp_path, props, flow_id=9)
    marks: dict[str, str] = {}
    states = run_and_publish(spark, job, marks)
    assert [s.get("error") for s in states] == [None], states
    log = read(spark, tmp_path / "out" / table).collect()
    assert sorted((r["_cdc_op"], r["id"]) for r in log) == [("r", 1), ("r", 2), ("r", 3)]
    assert replay(log) == source_rows(shop) and log[0]["balance"] in (
        Decimal("1.50"),
        Decimal("3.00"),
        Decimal("4.50"),
    )
    first = cdc_mysql.parse_position(marks[table])

    run(shop, "INSERT INTO shop.customers VALUES (4, 'c4', 0)")
    run(shop, "UPDATE shop.customers SET name = 'c2 moved', balance = balance * 2 WHERE id = 2")
    run(shop, "DELETE FROM shop.customers WHERE id = 1")
    run(shop, "UPDATE shop.customers SET id = 7 WHERE id = 3")  # the row moves to another key
    job["execution_id"], job["previous_watermarks"] = 2, dict(marks)
    run_job(spark, job)  # dies before its commit: nothing published, nothing stored
    job["execution_id"] = 3
    run_and_publish(spark, job, marks)
    log = read(spark, tmp_path / "out" / table).collect()
    changes = sorted((r["_cdc_position"], r["_cdc_op"], r["id"]) for r in log if r["_cdc_op"] != "r")
    # The key change is a delete of the old key and the new row, in one place of the log.
    assert [(op, i) for _, op, i in changes] == [("c", 4), ("u", 2), ("d", 1), ("d", 3), ("u", 7)]
    assert len({p for p, _, _ in changes}) == 4 and changes[3][0] == changes[4][0]
    assert replay(log) == source_rows(shop)
    assert cdc_mysql.parse_position(marks[table]) > first

    job["execution_id"] = 4  # nothing new: nothing delivered again
    run_and_publish(spark, job, marks)
    assert len(read(spark, tmp_path / "out" / table).collect()) == len(log)


def _props(shop: dict[str, Any], tmp_path: Path) -> dict[str, str]:
    return {
        "source.class": CDC,
        "source.jdbc.url": shop["url"],
        "source.conn.username": "root",
        "source.cdc.tables": f"{shop['name']}.customers",
        "writer.output.format": "parquet",
        "data.publisher.final.dir": str(tmp_path / "out"),
    }


def _master(shop: dict[str, Any]) -> tuple[str, int]:
    with shop["conn"].cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
    return str(row[0]), int(row[1])


def test_positions_are_gtids_and_outlive_the_binlog_files_they_were_read_from(spark, shop, tmp_path: Path):
    """A server with GTIDs keeps the flow's position as ``gtid:<domain>-<server>-<seq>``: the files
    it was read from may be rotated and purged (or the flow pointed at a replica after a failover)
    and the next run still starts right after the last committed transaction."""
    table = f"{shop['name']}.customers"
    job = spec(tmp_path, _props(shop, tmp_path), flow_id=21)
    marks: dict[str, str] = {}
    run_and_publish(spark, job, marks)
    first = cdc_mysql.parse_position(marks[table])
    assert isinstance(first, cdc_mysql.Gtids) and marks[table].startswith("gtid:0-1-")

    run(shop, "INSERT INTO shop.customers VALUES (4, 'c4', 0)")
    run(shop, "UPDATE shop.customers SET name = 'c2 moved' WHERE id = 2")
    job["execution_id"] = 2
    run_and_publish(spark, job, marks)
    second = cdc_mysql.parse_position(marks[table])
    assert second > first
    run(shop, "FLUSH BINARY LOGS")
    run(shop, f"PURGE BINARY LOGS TO '{_master(shop)[0]}'")  # every file read so far is gone
    run(shop, "DELETE FROM shop.customers WHERE id = 1")
    job["execution_id"] = 3
    states = run_and_publish(spark, job, marks)
    assert [s.get("error") for s in states] == [None], states
    log = read(spark, tmp_path / "out" / table).collect()
    changes = sorted((r["_cdc_position"], r["_cdc_op"], r["id"]) for r in log if r["_cdc_op"] != "r")
    assert [(op, i) for _, op, i in changes] == [("c", 4), ("u", 2), ("d", 1)]
    assert (
        all(p.startswith("gtid:0000000000-") for p, _, _ in changes) and len({p for p, _, _ in changes}) == 3
    )
    assert replay(log) == source_rows(shop)
    assert cdc_mysql.parse_position(marks[table]) > second


def test_a_position_kept_as_a_file_offset_carries_on_in_gtids(spark, shop, tmp_path: Path):
    """A flow whose position was stored as ``file:offset`` goes on from exactly there: the server
    says which GTID position that offset is (``BINLOG_GTID_POS``), and the new position is a GTID."""
    table = f"{shop['name']}.customers"
    job = spec(tmp_path, _props(shop, tmp_path), flow_id=22)
    marks: dict[str, str] = {}
    run_and_publish(spark, job, marks)
    run(shop, "INSERT INTO shop.customers VALUES (5, 'before', 0)")
    file, offset = _master(shop)
    marks[table] = cdc_mysql.FilePosition(file, offset).text()  # as a run of the file-offset days left it
    run(shop, "UPDATE shop.customers SET name = 'after' WHERE id = 5")
    job["execution_id"] = 2
    states = run_and_publish(spark, job, marks)
    assert [s.get("error") for s in states] == [None], states
    log = read(spark, tmp_path / "out" / table).collect()
    assert sorted((r["_cdc_op"], r["id"], r["name"]) for r in log if r["_cdc_op"] != "r") == [
        ("u", 5, "after")
    ]
    assert marks[table].startswith("gtid:")


def test_a_server_without_gtids_yet_falls_back_to_file_offsets(spark, shop, tmp_path: Path):
    """Right after ``RESET MASTER`` the server has logged no transaction and has no GTID position:
    the snapshot's position is a file offset, and the next run, the server having GTIDs again,
    reads on from it without losing or repeating a change."""
    table = f"{shop['name']}.customers"
    run(shop, "RESET MASTER")
    job = spec(tmp_path, _props(shop, tmp_path), flow_id=23)
    marks: dict[str, str] = {}
    run_and_publish(spark, job, marks)
    assert isinstance(cdc_mysql.parse_position(marks[table]), cdc_mysql.FilePosition), marks
    run(shop, "INSERT INTO shop.customers VALUES (6, 'c6', 0)")
    run(shop, "DELETE FROM shop.customers WHERE id = 3")
    job["execution_id"] = 2
    states = run_and_publish(spark, job, marks)
    assert [s.get("error") for s in states] == [None], states
    log = read(spark, tmp_path / "out" / table).collect()
    assert sorted((r["_cdc_op"], r["id"]) for r in log if r["_cdc_op"] != "r") == [("c", 6), ("d", 3)]
    assert replay(log) == source_rows(shop) and marks[table].startswith("gtid:")
    job["execution_id"] = 3
    run_and_publish(spark, job, marks)
    assert len(read(spark, tmp_path / "out" / table).collect()) == len(log)
