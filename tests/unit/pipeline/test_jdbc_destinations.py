"""A JDBC destination in each dialect: rows land in a MariaDB or SQLite table through a staging table
and a publish marker, exactly once — running the commit again changes nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.commit_steps import CommitSequence
from portal.pipeline.publisher import plan_commit

from .conftest import mysql
from .helpers import NOW, spec, write_csv


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
