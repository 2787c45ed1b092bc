"""A flow takes a whole schema: every table a pattern matches is a dataset with its own watermark,
a table created later joins on the next run, and one table failing publishes by the commit policy
(partial: the others; full: nothing) — on the real PostgreSQL and MariaDB servers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from pyspark.sql import SparkSession

from tests.builders.pipeline import run
from tests.builders.servers import mysql
from tests.unit.pipeline.helpers import read, spec


def _table(pg: psycopg.Connection, name: str, ids: range, watermark: str = "updated_at") -> None:
    pg.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, v text, {watermark} timestamp)")
    for i in ids:
        pg.execute(f"INSERT INTO {name} VALUES (%s, %s, %s)", (i, f"v{i}", f"2024-01-01 00:00:{i:02d}"))  # noqa: S608


def _props(url: str, user: str, tmp_path: Path, tables: str, **extra: str) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
        "source.jdbc.url": url,
        "source.conn.username": user,
        "source.jdbc.tables": tables,
        "extract.delta.fields": "updated_at",
        "extract.primary.key.fields": "id",
        "data.publisher.final.dir": str(tmp_path / "lake"),
        **extra,
    }


def test_a_postgresql_schema_pattern_reads_every_table_and_new_ones_join(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    pg.execute("DROP SCHEMA IF EXISTS ws CASCADE")
    pg.execute("CREATE SCHEMA ws")
    _table(pg, "ws.a", range(1, 4))
    _table(pg, "ws.b", range(1, 3))
    state: dict[str, dict[str, str]] = {"watermarks": {}, "schemas": {}}
    props = _props(
        pg_database["url"], pg_database["user"], tmp_path, "ws.*", **{"job.commit.policy": "partial"}
    )

    first = run(spark, spec(tmp_path, props, 1), state)
    assert {u: s["records_extracted"] for u, s in first.items()} == {"ws.a": 3, "ws.b": 2}
    assert state["watermarks"] == {"ws.a": "2024-01-01 00:00:03", "ws.b": "2024-01-01 00:00:02"}

    _table(pg, "ws.c", range(1, 5))  # created after the flow was saved: joins on the next run
    pg.execute("INSERT INTO ws.a VALUES (4, 'v4', '2024-01-01 00:00:04')")
    second = run(spark, spec(tmp_path, props, 2), state)
    assert {u: s["records_extracted"] for u, s in second.items()} == {"ws.a": 1, "ws.b": 0, "ws.c": 4}
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "ws.c").collect()) == [1, 2, 3, 4]

    # A table without the watermark column fails alone: partial publishes the others.
    _table(pg, "ws.bad", range(1, 2), watermark="changed_at")
    pg.execute("INSERT INTO ws.b VALUES (3, 'v3', '2024-01-01 00:00:03')")
    third = run(spark, spec(tmp_path, props, 3), state)
    assert third["ws.bad"]["status"] == "FAILED" and "updated_at" in third["ws.bad"]["error"]
    assert state["watermarks"]["ws.b"] == "2024-01-01 00:00:03" and "ws.bad" not in state["watermarks"]
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "ws.b").collect()) == [1, 2, 3]

    # Under the full policy the same failure publishes nothing of any table.
    pg.execute("INSERT INTO ws.a VALUES (5, 'v5', '2024-01-01 00:00:05')")
    full = {**props, "job.commit.policy": "full"}
    fourth = run(spark, spec(tmp_path, full, 4), state)
    assert fourth["ws.a"]["status"] == "SUCCEEDED" and fourth["ws.bad"]["status"] == "FAILED"
    assert state["watermarks"]["ws.a"] == "2024-01-01 00:00:04"
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "ws.a").collect()) == [1, 2, 3, 4]

    # Excluding the broken table lets the full policy publish again, row 5 exactly once.
    fifth = run(spark, spec(tmp_path, {**full, "source.jdbc.tables.exclude": "ws.bad"}, 5), state)
    assert set(fifth) == {"ws.a", "ws.b", "ws.c"} and all(s["status"] == "SUCCEEDED" for s in fifth.values())
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "ws.a").collect()) == [1, 2, 3, 4, 5]


def test_a_mariadb_pattern_matches_the_database_of_the_url(
    spark: SparkSession, mysql_database: dict[str, Any], tmp_path: Path
) -> None:
    db = mysql_database["db"]
    mysql("DROP TABLE IF EXISTS ws_x, ws_y, ws_z, other_t", db)
    for name, count in (("ws_x", 2), ("ws_y", 3), ("other_t", 1)):
        mysql(f"CREATE TABLE {name} (id BIGINT PRIMARY KEY, v VARCHAR(20), updated_at DATETIME)", db)
        for i in range(1, count + 1):
            mysql(f"INSERT INTO {name} VALUES ({i}, 'v{i}', '2024-01-01 00:00:0{i}')", db)  # noqa: S608
    state: dict[str, dict[str, str]] = {"watermarks": {}, "schemas": {}}
    props = _props(mysql_database["url"], "root", tmp_path, "ws_*")

    first = run(spark, spec(tmp_path, props, 1), state)
    assert {u: s["records_extracted"] for u, s in first.items()} == {"ws_x": 2, "ws_y": 3}

    mysql("CREATE TABLE ws_z (id BIGINT PRIMARY KEY, v VARCHAR(20), updated_at DATETIME)", db)
    mysql("INSERT INTO ws_z VALUES (1, 'z', '2024-01-02 00:00:00')", db)
    second = run(spark, spec(tmp_path, props, 2), state)
    assert {u: s["records_extracted"] for u, s in second.items()} == {"ws_x": 0, "ws_y": 0, "ws_z": 1}
    assert set(state["watermarks"]) == {"ws_x", "ws_y", "ws_z"}
    assert [r.v for r in read(spark, tmp_path / "lake" / "ws_z").collect()] == ["z"]


def test_a_pattern_reads_mixed_case_tables_by_their_quoted_names(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    """PostgreSQL folds an unquoted name to lower case: ``Ws_Mixed.Orders`` matched by a pattern is
    read (and named as a dataset) as ``"Ws_Mixed"."Orders"``."""
    pg.execute('DROP SCHEMA IF EXISTS "Ws_Mixed" CASCADE')
    pg.execute('CREATE SCHEMA "Ws_Mixed"')
    _table(pg, '"Ws_Mixed"."Orders"', range(1, 3))
    _table(pg, '"Ws_Mixed".plain', range(1, 2))
    state: dict[str, dict[str, str]] = {"watermarks": {}, "schemas": {}}
    props = _props(pg_database["url"], pg_database["user"], tmp_path, "Ws_Mixed.*")

    found = run(spark, spec(tmp_path, props, 1), state)

    assert {u: (s.get("error"), s["records_extracted"]) for u, s in found.items()} == {
        '"Ws_Mixed"."Orders"': (None, 2),
        '"Ws_Mixed".plain': (None, 1),
    }
