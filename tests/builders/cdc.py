"""A private wal_level=logical PostgreSQL's shop and warehouse databases, and a CDC run
crashed at a commit step with the change log it leaves: what the CDC crash stories share."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq
import pytest

from portal.orchestration import services
from tests.integration.crash_harness import Workers, finished
from tests.pg_logical import own_database

POINTS = [
    ["after_task_output"],
    ["after_steps_written"],
    ["after_step:1"],
    ["before_steps_removed"],
    ["before_source_ack"],  # published, the slot not acknowledged yet: the watermark is the truth
]


@pytest.fixture
def shop(logical_pg: str) -> Iterator[dict[str, Any]]:
    with own_database(
        logical_pg,
        "CREATE SCHEMA shop",
        "CREATE TABLE shop.customers (id int PRIMARY KEY, name text, balance numeric(10,2))",
        "INSERT INTO shop.customers SELECT g, 'c' || g, g FROM generate_series(1, 10) g",
    ) as found:
        yield found


def change_log(folder: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(folder.rglob("*.parquet")):
        rows.extend(pq.read_table(path).to_pylist())
    return sorted(rows, key=lambda r: r["_cdc_position"])


def replay(log: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The table the change log describes, applied in log order."""
    table: dict[int, tuple[Any, ...]] = {}
    for row in log:
        if row["_cdc_op"] == "d":
            table.pop(row["id"], None)
        else:
            table[row["id"]] = (row["id"], row["name"], row["balance"])
    return [table[k] for k in sorted(table)]


def crash_a_run(
    db: psycopg.Connection, workers: Workers, flow: Any, point: str, new_id: int
) -> tuple[Any, bool]:
    """Change the source (an insert, an update of every third row, a delete), arm the failpoint,
    run the flow; wait for the worker to die there and for another to finish the execution.
    Returns the execution and whether a worker died."""
    db.execute("INSERT INTO shop.customers VALUES (%s, 'new', 1)", (new_id,))
    db.execute("UPDATE shop.customers SET balance = balance + 1, name = name || '+' WHERE id % 3 = 0")
    db.execute("DELETE FROM shop.customers WHERE id = (SELECT min(id) FROM shop.customers)")
    # A key change: a delete of the old key and the new row, both at the update's position.
    db.execute("UPDATE shop.customers SET id = id + 1000 WHERE id = %s", (new_id - 1,))
    workers.arm(point)
    execution = services.run_now(flow, user=flow.owner)
    died = workers.wait_for_a_death()
    workers.arm("")
    workers.fill("")
    return finished(execution, timeout=900), died  # minutes of Spark on 2 busy cores


@pytest.fixture
def warehouse() -> Iterator[dict[str, Any]]:
    name = f"flowport_cdc_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(f"postgres://postgres@127.0.0.1:5432/{name}", autocommit=True) as db:
        yield {"db": db, "url": f"jdbc:postgresql://127.0.0.1:5432/{name}"}
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
