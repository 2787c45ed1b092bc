"""Change data capture from a MariaDB binary log (a private server with ``binlog_format=ROW``): a
flow's first run delivers a consistent snapshot whose binlog position MariaDB gives, later runs each
insert, update and delete once — a run that died before its commit reads them again, a committed
one never — and replaying the change log gives the source table row by row."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql
import pytest

from portal.pipeline import cdc_mysql, run_job
from tests.mariadb_binlog import binlog_mariadb  # noqa: F401 (fixture)

from .helpers import read, run_and_publish, spec

CDC = "portal.pipeline.sources.cdc.CdcSource"


@pytest.fixture
def shop(binlog_mariadb: dict[str, Any]) -> Iterator[dict[str, Any]]:  # noqa: F811
    name = f"shop_{uuid.uuid4().hex[:8]}"
    conn = pymysql.connect(**binlog_mariadb, password="", autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
        cur.execute(
            f"CREATE TABLE `{name}`.customers (id int PRIMARY KEY, name varchar(40), balance decimal(10,2))"
        )
        cur.execute(f"INSERT INTO `{name}`.customers VALUES (1, 'c1', 1.5), (2, 'c2', 3), (3, 'c3', 4.5)")  # noqa: S608 - test names
    url = f"jdbc:mariadb://{binlog_mariadb['host']}:{binlog_mariadb['port']}/{name}"
    yield {"name": name, "conn": conn, "url": url}
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE `{name}`")
    conn.close()


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
    job["execution_id"], job["previous_watermarks"] = 2, dict(marks)
    run_job(spark, job)  # dies before its commit: nothing published, nothing stored
    job["execution_id"] = 3
    run_and_publish(spark, job, marks)
    log = read(spark, tmp_path / "out" / table).collect()
    changes = sorted((r["_cdc_position"], r["_cdc_op"], r["id"]) for r in log if r["_cdc_op"] != "r")
    assert [(op, i) for _, op, i in changes] == [("c", 4), ("u", 2), ("d", 1)]
    assert len({p for p, _, _ in changes}) == 3
    assert replay(log) == source_rows(shop)
    assert cdc_mysql.parse_position(marks[table]) > first

    job["execution_id"] = 4  # nothing new: nothing delivered again
    run_and_publish(spark, job, marks)
    assert len(read(spark, tmp_path / "out" / table).collect()) == len(log)
