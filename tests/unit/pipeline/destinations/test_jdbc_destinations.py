"""A JDBC destination in each dialect: rows land in a MariaDB or SQLite table through a staging table
and a publish marker, exactly once — running the commit again changes nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.destinations.commit_steps import CommitSequence
from portal.pipeline.destinations.commitplan import plan_commit
from tests.builders.servers import mysql
from tests.unit.pipeline.helpers import NOW, publish, run_and_publish, spec, write_csv


def _publish_orders(spark: SparkSession, tmp_path: Path, url: str, **extra: str) -> tuple[list[dict], str]:
    write_csv(
        tmp_path / "landing" / "orders" / "a.csv", "id,name", ["1,a", "2,b", "5000000000,c"], mtime=NOW - 60
    )
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "writer.output.format": "JDBC",
        "writer.jdbc.url": url,
        "writer.jdbc.table": "sink_orders",
        **extra,
    }
    job = spec(tmp_path, props, execution_id=7)
    states = run_job(spark, job)
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    publish = [s for s in plan_commit(job, states)["orders"] if s["type"] == "jdbc_publish"]
    assert CommitSequence.from_dicts(publish, props).run() == 1
    assert CommitSequence.from_dicts(publish, props).run() == 0  # verified: nothing done twice
    return publish, states[0]["branches"][0]["staging_table"]


def test_a_mariadb_destination_gets_the_rows_once(
    spark: SparkSession, mysql_database: dict[str, Any], tmp_path: Path
) -> None:
    db = mysql_database["db"]
    mysql("DROP TABLE IF EXISTS sink_orders; DROP TABLE IF EXISTS flowport_publish_marker", db)
    _, staging = _publish_orders(spark, tmp_path, mysql_database["url"], **{"writer.jdbc.username": "root"})
    assert mysql("SELECT id, name FROM sink_orders ORDER BY id", db).split() == [
        "1", "a", "2", "b", "5000000000", "c"
    ]  # fmt: skip
    assert mysql(
        "SELECT execution_id, job_name, rows_published FROM flowport_publish_marker", db
    ).split() == [
        "7",
        "job",
        "3",
    ]
    assert mysql(f"SHOW TABLES LIKE '{staging}'", db).strip() == ""


def test_a_sqlite_destination_gets_the_rows_once(spark: SparkSession, tmp_path: Path) -> None:
    lite = tmp_path / "sink.db"
    _, staging = _publish_orders(spark, tmp_path, f"jdbc:sqlite:{lite}")
    with sqlite3.connect(lite) as conn:
        assert conn.execute("SELECT id, name FROM sink_orders ORDER BY id").fetchall() == [
            (1, "a"),
            (2, "b"),
            (5000000000, "c"),
        ]
        assert conn.execute("SELECT rows_published FROM flowport_publish_marker").fetchall() == [(3,)]
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (staging,)).fetchall()


def _rows_of(dialect: str, where: dict[str, Any]) -> list[tuple]:
    query = "SELECT id, name FROM upsert_orders ORDER BY id"
    if dialect == "postgresql":
        return [tuple(r) for r in where["pg"].execute(query).fetchall()]
    if dialect == "mysql":
        cells = mysql(query, where["mysql"]["db"]).split()
        return [(int(cells[i]), cells[i + 1]) for i in range(0, len(cells), 2)]
    with sqlite3.connect(where["sqlite"]) as conn:
        return conn.execute(query).fetchall()


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "sqlite"])
def test_an_upsert_merges_on_the_primary_key_exactly_once(
    dialect: str,
    spark: SparkSession,
    pg: psycopg.Connection,
    pg_database: dict[str, Any],
    mysql_database: dict[str, Any],
    tmp_path: Path,
) -> None:
    urls = {
        "postgresql": (pg_database["url"], pg_database["user"]),
        "mysql": (mysql_database["url"], "root"),
        "sqlite": (f"jdbc:sqlite:{tmp_path / 'sink.db'}", ""),
    }
    pg.execute("DROP TABLE IF EXISTS upsert_orders")
    mysql("DROP TABLE IF EXISTS upsert_orders", mysql_database["db"])
    where = {"pg": pg, "mysql": mysql_database, "sqlite": tmp_path / "sink.db"}
    url, user = urls[dialect]
    landing = tmp_path / "landing" / "orders"
    write_csv(landing / "a.csv", "id,name,updated", ["1,ann,1", "2,bob,1", "3,cid,1"], mtime=NOW - 120)
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "writer.output.format": "JDBC",
        "writer.jdbc.url": url,
        "writer.jdbc.username": user,
        "writer.jdbc.table": "upsert_orders",
        "writer.jdbc.marker.table": "upsert_marker",
        "writer.jdbc.write.mode": "upsert",
        "extract.primary.key.fields": "id",
        "extract.delta.fields": "updated",
    }
    marks: dict[str, str] = {}
    run_and_publish(spark, spec(tmp_path, props, execution_id=1), marks)
    # bob renamed, dan arrives twice in one run: the later version wins.
    write_csv(landing / "b.csv", "id,name,updated", ["2,bobby,2", "4,dan,2", "4,daniel,3"], mtime=NOW - 60)
    job = spec(tmp_path, props, execution_id=2, watermarks=marks)
    states = run_job(spark, job)
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    plan = publish(job, states, dict(marks))
    assert CommitSequence.from_dicts(plan["orders"][:-1], props).run() == 0  # again: nothing changes
    assert _rows_of(dialect, where) == [(1, "ann"), (2, "bobby"), (3, "cid"), (4, "daniel")]


def test_an_upsert_without_keys_is_refused_before_anything_is_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_csv(tmp_path / "landing" / "orders" / "a.csv", "id", ["1"], mtime=NOW - 60)
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "writer.output.format": "JDBC",
        "writer.jdbc.url": "jdbc:sqlite:/nonexistent/x.db",
        "writer.jdbc.table": "t",
        "writer.jdbc.write.mode": "upsert",
    }
    states = run_job(spark, spec(tmp_path, props))
    assert "branch 0 (fork_0): upsert needs extract.primary.key.fields" in states[0]["error"], states[0][
        "error"
    ]
