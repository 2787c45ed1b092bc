"""Schema drift with explicit rules: a real source table is altered between runs (PostgreSQL and
MariaDB) and ``schema.evolution.policy`` decides — evolve delivers the new column and the widened
type (a JDBC destination adds and widens its columns), freeze fails with the diff and keeps failing,
discard_columns delivers the recorded schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from portal.pipeline.schema.drift import columns
from tests.builders.pipeline import run
from tests.builders.servers import mysql

from ..helpers import read, spec


class Source:
    """One drifting table on a real server: create, insert, add a column, widen the key."""

    def __init__(
        self, dialect: str, pg: psycopg.Connection, pg_db: dict[str, Any], my_db: dict[str, Any]
    ) -> None:
        self.dialect, self.pg, self.db = dialect, pg, my_db["db"]
        self.url, self.user = (
            (pg_db["url"], pg_db["user"]) if dialect == "postgresql" else (my_db["url"], "root")
        )

    @property
    def timestamp(self) -> str:
        """Spark's type of the TIMESTAMP column: PostgreSQL's is a wall time, MariaDB's an instant."""
        return "timestamp_ntz" if self.dialect == "postgresql" else "timestamp"

    def sql(self, statement: str) -> None:
        if self.dialect == "postgresql":
            self.pg.execute(statement)
        else:
            mysql(statement, self.db)

    def create(self, table: str) -> None:
        self.sql(f"DROP TABLE IF EXISTS {table}")
        self.sql(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20), updated_at TIMESTAMP NULL)")
        for i in (1, 2, 3):
            self.sql(f"INSERT INTO {table} VALUES ({i}, 'n{i}', '2024-01-01 00:00:0{i}')")  # noqa: S608

    def drift(self, table: str) -> None:
        """What a team does to a live table: a new column, a wider key, a new row using both."""
        self.sql(f"ALTER TABLE {table} ADD COLUMN email VARCHAR(40)")
        widen = "ALTER COLUMN id TYPE bigint" if self.dialect == "postgresql" else "MODIFY id BIGINT"
        self.sql(f"ALTER TABLE {table} {widen}")
        self.sql(f"INSERT INTO {table} VALUES (5000000000, 'big', '2024-01-01 00:00:09', 'b@x.org')")  # noqa: S608

    def props(self, tmp_path: Path, table: str, policy: str, **extra: str) -> dict[str, str]:
        return {
            "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
            "source.jdbc.url": self.url,
            "source.conn.username": self.user,
            "source.jdbc.tables": table,
            "extract.delta.fields": "updated_at",
            "schema.evolution.policy": policy,
            "data.publisher.final.dir": str(tmp_path / "lake"),
            **extra,
        }


DIALECTS = ["postgresql", "mysql"]


@pytest.fixture
def source(request, pg, pg_database, mysql_database) -> Source:
    return Source(request.param, pg, pg_database, mysql_database)


@pytest.mark.parametrize("source", DIALECTS, indirect=True)
def test_freeze_fails_the_dataset_with_the_diff_until_the_schema_is_back(
    spark: SparkSession, source: Source, tmp_path: Path
) -> None:
    source.create("drift_freeze")
    state: dict[str, dict[str, str]] = {"watermarks": {}, "schemas": {}}
    props = source.props(tmp_path, "drift_freeze", "freeze")
    assert run(spark, spec(tmp_path, props, 1), state)["drift_freeze"]["status"] == "SUCCEEDED"
    recorded = state["schemas"]["drift_freeze"]
    assert columns(recorded) == [("id", "integer"), ("name", "string"), ("updated_at", source.timestamp)]

    source.drift("drift_freeze")
    for execution in (2, 3):  # the refused schema is not recorded: it stays refused
        task = run(spark, spec(tmp_path, props, execution), state)["drift_freeze"]
        assert task["status"] == "FAILED"
        assert task["error"] == (
            "schema.evolution.policy=freeze: the source schema of dataset 'drift_freeze' changed since the "
            "recorded one: added email (string); changed id integer -> long (widened)"
        )
        assert state["watermarks"]["drift_freeze"] == "2024-01-01 00:00:03"
        assert state["schemas"]["drift_freeze"] == recorded
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "drift_freeze").collect()) == [1, 2, 3]


@pytest.mark.parametrize("source", DIALECTS, indirect=True)
def test_discard_columns_delivers_the_recorded_columns_only(
    spark: SparkSession, source: Source, tmp_path: Path
) -> None:
    source.create("drift_discard")
    state: dict[str, dict[str, str]] = {"watermarks": {}, "schemas": {}}
    props = source.props(tmp_path, "drift_discard", "discard_columns")
    run(spark, spec(tmp_path, props, 1), state)
    source.sql("ALTER TABLE drift_discard ADD COLUMN email VARCHAR(40)")
    source.sql("INSERT INTO drift_discard VALUES (4, 'n4', '2024-01-01 00:00:04', 'd@x.org')")
    task = run(spark, spec(tmp_path, props, 2), state)["drift_discard"]
    assert task["status"] == "SUCCEEDED" and task["records_extracted"] == 1
    assert [n for n, _ in columns(state["schemas"]["drift_discard"])] == ["id", "name", "updated_at"]
    rows = read(spark, tmp_path / "lake" / "drift_discard").collect()
    assert sorted(r.id for r in rows) == [1, 2, 3, 4] and "email" not in rows[0].asDict()

    # A widened type cannot keep the recorded schema: discard_columns refuses it with the diff.
    source.sql(
        "ALTER TABLE drift_discard "
        + ("ALTER COLUMN id TYPE bigint" if source.dialect == "postgresql" else "MODIFY id BIGINT")
    )
    source.sql("INSERT INTO drift_discard VALUES (5, 'n5', '2024-01-01 00:00:05', NULL)")
    task = run(spark, spec(tmp_path, props, 3), state)["drift_discard"]
    assert (
        task["status"] == "FAILED"
        and "changed id integer -> long (widened); discard_columns" in task["error"]
    )


@pytest.mark.parametrize("source", DIALECTS, indirect=True)
def test_evolve_adds_the_column_and_widens_the_jdbc_destination(
    spark: SparkSession, source: Source, tmp_path: Path
) -> None:
    """The destination is a table on the same server, as a team replicating a database would have."""
    source.create("drift_evolve")
    source.sql("DROP TABLE IF EXISTS drift_sink")
    state: dict[str, dict[str, str]] = {"watermarks": {}, "schemas": {}}
    props = source.props(
        tmp_path,
        "drift_evolve",
        "evolve",
        **{
            "writer.output.format": "JDBC",
            "writer.jdbc.url": source.url,
            "writer.jdbc.username": source.user,
            "writer.jdbc.table": "drift_sink",
            "writer.jdbc.marker.table": "drift_marker",
        },
    )
    assert run(spark, spec(tmp_path, props, 1), state)["drift_evolve"]["status"] == "SUCCEEDED"
    source.drift("drift_evolve")
    task = run(spark, spec(tmp_path, props, 2), state)["drift_evolve"]
    assert task["status"] == "SUCCEEDED", task["error"]
    assert columns(state["schemas"]["drift_evolve"]) == [
        ("id", "long"),
        ("name", "string"),
        ("updated_at", source.timestamp),
        ("email", "string"),
    ]
    query = "SELECT id, COALESCE(email, '-') FROM drift_sink ORDER BY id"
    if source.dialect == "postgresql":
        rows = [tuple(r) for r in source.pg.execute(query).fetchall()]
        kind = source.pg.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_name='drift_sink' AND column_name='id'"
        ).fetchone()[0]
    else:
        cells = mysql(query, source.db).split()
        rows = [(int(cells[i]), cells[i + 1]) for i in range(0, len(cells), 2)]
        kind = mysql(
            "SELECT data_type FROM information_schema.columns WHERE table_schema=DATABASE() "
            "AND table_name='drift_sink' AND column_name='id'",
            source.db,
        ).strip()
    assert rows == [(1, "-"), (2, "-"), (3, "-"), (5000000000, "b@x.org")]  # the wide key fits
    assert kind == "bigint"

    # A column the source drops is still delivered, as NULLs of its recorded type.
    source.sql("ALTER TABLE drift_evolve DROP COLUMN name")
    source.sql("INSERT INTO drift_evolve VALUES (6, '2024-01-01 00:00:10', 'c@x.org')")
    task = run(spark, spec(tmp_path, props, 3), state)["drift_evolve"]
    assert task["status"] == "SUCCEEDED", task["error"]
    assert [n for n, _ in columns(state["schemas"]["drift_evolve"])] == ["id", "updated_at", "email", "name"]


@pytest.mark.parametrize("source", ["postgresql"], indirect=True)
def test_evolve_refuses_a_change_that_is_not_a_widening(
    spark: SparkSession, source: Source, tmp_path: Path
) -> None:
    source.create("drift_narrow")
    state: dict[str, dict[str, str]] = {"watermarks": {}, "schemas": {}}
    props = source.props(tmp_path, "drift_narrow", "evolve")
    run(spark, spec(tmp_path, props, 1), state)
    source.sql("ALTER TABLE drift_narrow ALTER COLUMN id TYPE text")
    source.sql("INSERT INTO drift_narrow VALUES ('x4', 'n4', '2024-01-01 00:00:04')")
    task = run(spark, spec(tmp_path, props, 2), state)["drift_narrow"]
    assert task["status"] == "FAILED"
    assert "changed id integer -> string; evolve only adds columns and widens types" in task["error"]
