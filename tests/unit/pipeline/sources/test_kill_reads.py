"""Kill stops a JDBC job where it is: a read of a slow view, or the planning query before it, is
cancelled on the database server, so the job ends at once instead of when the statement would have.

The views sleep 40 s a row (two minutes in all); each story kills the job once its statement runs
on the server and expects it over long before that."""

# ruff: noqa: S608 - the statements are built from this module's constants

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.cancelling import TAG_PREFIX
from tests.builders.servers import mysql
from tests.unit.pipeline.helpers import spec

SLEEP_PER_ROW = 40
# Far below the statement's own two minutes, with room for a busy machine.
ENDED_WITHIN = 20.0

# Sleeps only inside the extraction's statement (the one reading ``fp_wu``): planning is quick.
_PG_SLOW_READ = f"""
CREATE OR REPLACE FUNCTION slow_when_read() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF strpos(current_query(), 'fp_wu') > 0 THEN PERFORM pg_sleep({SLEEP_PER_ROW}); END IF;
  RETURN true;
END $$;
CREATE OR REPLACE VIEW slow_orders AS
  SELECT g AS id, 'c' || g AS customer FROM generate_series(1, 3) g WHERE slow_when_read();
"""


def _props(db: dict[str, Any], tmp_path: Path, table: str) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
        "source.jdbc.url": db["url"],
        "source.conn.username": db["user"],
        "source.jdbc.tables": table,
        "extract.is.full": "true",
        "data.publisher.final.dir": str(tmp_path / "lake"),
    }


def _kill_when(
    spark: SparkSession, running: Callable[[], bool], job: dict[str, Any]
) -> tuple[list[dict[str, Any]], float]:
    """Run ``job``, kill it once ``running()`` sees its statement on the server; the states and the
    seconds from the kill to the job's end."""
    cancel = threading.Event()
    states: list[dict[str, Any]] = []
    runner = threading.Thread(target=lambda: states.extend(run_job(spark, job, cancel_event=cancel)))
    runner.start()
    deadline = time.monotonic() + 120
    while not running():
        assert runner.is_alive(), f"the job ended before its statement was seen running: {states}"
        assert time.monotonic() < deadline, "the job's statement never showed on the server"
        time.sleep(0.1)
    killed = time.monotonic()
    cancel.set()
    runner.join(timeout=3 * SLEEP_PER_ROW)
    assert not runner.is_alive(), "the killed job is still running"
    return states, time.monotonic() - killed


def _pg_tagged_statements(pg: psycopg.Connection, *needles: str) -> int:
    found = pg.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() "
        "AND strpos(query, %s) > 0" + " AND strpos(query, %s) > 0" * len(needles),
        (TAG_PREFIX, *needles),
    ).fetchone()
    return int(found[0]) if found else 0


def _gone(pg: psycopg.Connection, needle: str, within: float = 10.0) -> bool:
    """No statement of the job still runs on the server a moment after it ended (a cancel is
    asynchronous: on a busy machine the backend takes a moment to stop; the statement itself would
    run for SLEEP_PER_ROW seconds a row)."""
    deadline = time.monotonic() + within
    while _pg_tagged_statements(pg, needle):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_a_killed_read_of_a_slow_view_ends_at_once_and_leaves_nothing_running(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    pg.execute(_PG_SLOW_READ)
    job = spec(tmp_path, _props(pg_database, tmp_path, "slow_orders"), execution_id=71, job_name="slow_read")

    states, took = _kill_when(spark, lambda: _pg_tagged_statements(pg, "fp_wu") > 0, job)

    assert took < ENDED_WITHIN, f"the job ran on {took:.1f} s after Kill"
    assert [s["status"] for s in states] == ["CANCELLED"]
    assert "cancelled while this work unit ran (slow_orders)" in states[0]["error"]
    assert _gone(pg, "fp_wu")  # the server stopped the statement too
    assert not (tmp_path / "lake").exists()


def test_a_job_killed_while_planning_says_so_and_its_query_is_cancelled(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    """Planning asks the table's sizes first; on a view that is slow to count, that is where Kill
    finds the job."""
    pg.execute(
        "CREATE OR REPLACE VIEW slow_to_count AS "
        f"SELECT g AS id FROM generate_series(1, 3) g WHERE pg_sleep({SLEEP_PER_ROW}) IS NOT NULL"
    )
    job = spec(
        tmp_path, _props(pg_database, tmp_path, "slow_to_count"), execution_id=72, job_name="slow_plan"
    )

    states, took = _kill_when(spark, lambda: _pg_tagged_statements(pg, "slow_to_count") > 0, job)

    assert took < ENDED_WITHIN, f"the job ran on {took:.1f} s after Kill"
    assert [s["status"] for s in states] == ["CANCELLED"]
    assert states[0]["error"].startswith("job cancelled while planning")
    assert _gone(pg, "slow_to_count")


def test_a_killed_mariadb_job_has_its_query_killed_on_the_server(
    spark: SparkSession, mysql_database: dict[str, Any], tmp_path: Path
) -> None:
    db = mysql_database["db"]
    mysql(
        "CREATE OR REPLACE VIEW slow_items AS SELECT seq AS id FROM seq_1_to_3 "
        f"WHERE SLEEP({SLEEP_PER_ROW}) = 0",
        db,
    )
    job = spec(
        tmp_path, _props(mysql_database, tmp_path, "slow_items"), execution_id=73, job_name="slow_maria"
    )

    def running() -> bool:
        return (
            mysql(
                "SELECT count(*) FROM information_schema.PROCESSLIST "
                f"WHERE INFO LIKE '%{TAG_PREFIX}%' AND INFO LIKE '%slow_items%' AND ID <> CONNECTION_ID()"
            ).strip()
            != "0"
        )

    states, took = _kill_when(spark, running, job)

    assert took < ENDED_WITHIN, f"the job ran on {took:.1f} s after Kill"
    assert [s["status"] for s in states] == ["CANCELLED"]
    assert not running()
