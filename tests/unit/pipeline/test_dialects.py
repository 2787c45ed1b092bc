"""Every JDBC database in its own words, on the real servers: PostgreSQL, MariaDB and SQLite each
quote, cast to text and limit as their dialect says; the JDBC source reads each incrementally with
the driver its node declares (or the dialect's); a missing driver says so."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.dialects import MYSQL, POSTGRESQL, SQLITE, Dialect, dialect_for
from portal.pipeline.errors import ConfigError
from tests.builders.servers import mysql

from .helpers import read, run_and_publish, spec


def _probe(spark: SparkSession, url: str, dialect: Dialect, user: str | None = None) -> list[Any]:
    """What the database answers to the dialect's quoted, cast, limited query."""
    column, table = dialect.quote("Gate No"), dialect.quote("Odd Table")
    query = dialect.limit(f"SELECT {dialect.cast_text(column)} AS gate FROM {table} ORDER BY id", 2)  # noqa: S608
    reader = spark.read.format("jdbc").options(url=dialect.spark_url(url), driver=dialect.driver)
    # As the source reads its watermark texts: SQLite's driver types an expression NUMERIC.
    reader = reader.option("customSchema", "gate STRING")
    if user:
        reader = reader.option("user", user)
    return [r.gate for r in reader.option("dbtable", f"({query}) AS probe").load().collect()]


def test_each_dialect_quotes_casts_and_limits_on_its_real_server(
    spark: SparkSession,
    pg: psycopg.Connection,
    pg_database: dict[str, Any],
    mysql_database: dict[str, Any],
    tmp_path: Path,
) -> None:
    pg.execute('DROP TABLE IF EXISTS "Odd Table"')
    pg.execute('CREATE TABLE "Odd Table" (id int, "Gate No" int)')
    pg.execute('INSERT INTO "Odd Table" VALUES (1, 11), (2, 12), (3, 13)')
    mysql(
        "DROP TABLE IF EXISTS `Odd Table`; CREATE TABLE `Odd Table` (id int, `Gate No` int);"
        "INSERT INTO `Odd Table` VALUES (1, 11), (2, 12), (3, 13)",
        mysql_database["db"],
    )
    lite = tmp_path / "odd.db"
    with sqlite3.connect(lite) as conn:
        conn.execute('CREATE TABLE "Odd Table" (id int, "Gate No" int)')
        conn.execute('INSERT INTO "Odd Table" VALUES (1, 11), (2, 12), (3, 13)')

    assert _probe(spark, pg_database["url"], POSTGRESQL, pg_database["user"]) == ["11", "12"]
    assert _probe(spark, mysql_database["url"], MYSQL, "root") == ["11", "12"]
    assert _probe(spark, f"jdbc:sqlite:{lite}", SQLITE) == ["11", "12"]


def test_literals_and_identifiers_are_escaped_per_dialect() -> None:
    assert MYSQL.literal("it's a \\ path") == "'it''s a \\\\ path'"
    assert POSTGRESQL.literal("it's a \\ path") == "'it''s a \\ path'"
    assert MYSQL.quote("sales.my`table") == "`sales`.`my``table`"
    assert POSTGRESQL.quote('public."Mixed Case"') == '"public"."Mixed Case"'
    assert dialect_for("jdbc:mariadb://db/x") is MYSQL and dialect_for("jdbc:sqlite:/tmp/a.db") is SQLITE
    with pytest.raises(ConfigError, match=r"source.jdbc.url: no SQL dialect for 'oracle'"):
        dialect_for("jdbc:oracle:thin:@db:1521/x")


def _source(url: str, table: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
        "source.jdbc.url": url,
        "source.jdbc.tables": table,
        "extract.delta.fields": "updated_at",
        "extract.primary.key.fields": "id",
        "data.publisher.final.dir": str(tmp_path / "lake"),
        **extra,
    }


def test_the_jdbc_source_reads_mariadb_incrementally(
    spark: SparkSession, mysql_database: dict[str, Any], tmp_path: Path
) -> None:
    db = mysql_database["db"]
    mysql(
        "DROP TABLE IF EXISTS flights; CREATE TABLE flights (id bigint PRIMARY KEY, carrier text, "
        "updated_at datetime(6)); INSERT INTO flights VALUES (1, 'UA', '2013-03-01 05:00:00'), "
        "(2, 'AA', '2013-03-01 06:00:00'), (5000000000, 'B6', '2013-03-01 07:00:00')",
        db,
    )
    props = _source(mysql_database["url"], "flights", tmp_path, **{"source.conn.username": "root"})
    marks: dict[str, str] = {}
    states = run_and_publish(spark, spec(tmp_path, props), marks)
    assert [s["status"] for s in states] == ["SUCCEEDED"], states[0]["error"]
    assert marks["flights"].startswith("2013-03-01 07:00:00")

    mysql("INSERT INTO flights VALUES (6, 'DL', '2013-03-01 08:00:00')", db)
    states = run_and_publish(spark, spec(tmp_path, props, execution_id=2), marks)
    assert states[0]["records_extracted"] == 1
    rows = read(spark, tmp_path / "lake" / "flights").collect()
    assert sorted(r.id for r in rows) == [1, 2, 6, 5000000000]


def test_the_jdbc_source_reads_sqlite_with_its_64_bit_integers(spark: SparkSession, tmp_path: Path) -> None:
    lite = tmp_path / "flights.db"
    with sqlite3.connect(lite) as conn:
        conn.execute("CREATE TABLE flights (id INTEGER PRIMARY KEY, carrier TEXT, updated_at INTEGER)")
        conn.executemany("INSERT INTO flights VALUES (?, ?, ?)", [(1, "UA", 10), (5000000000, "B6", 20)])
    props = _source(f"jdbc:sqlite:{lite}", "flights", tmp_path)
    marks: dict[str, str] = {}
    states = run_and_publish(spark, spec(tmp_path, props), marks)
    assert [s["status"] for s in states] == ["SUCCEEDED"], states[0]["error"]
    assert marks == {"flights": "20"}
    df = read(spark, tmp_path / "lake" / "flights")
    assert dict(df.dtypes)["id"] == "bigint"
    assert sorted(r.id for r in df.collect()) == [1, 5000000000]  # not wrapped to 705032704


def test_a_missing_driver_class_is_the_error_not_py4j(spark: SparkSession, tmp_path: Path) -> None:
    props = _source(
        "jdbc:mariadb://127.0.0.1:3306/none",
        "flights",
        tmp_path,
        **{"source.jdbc.driver": "com.example.NoDriver"},
    )
    states = run_job(spark, spec(tmp_path, props))
    assert states[0]["status"] == "FAILED"
    assert "java.lang.ClassNotFoundException: com.example.NoDriver" in states[0]["error"], states[0]["error"]
    assert "An error occurred while calling" not in states[0]["error"]
