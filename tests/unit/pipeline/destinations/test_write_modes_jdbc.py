"""Write modes of a JDBC destination on real PostgreSQL and MariaDB: a run's staged rows overwrite,
merge into or add history to the target in the publish transaction, and running the publish again
after a crash (before the watermark step, or inside the step) changes nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from portal.pipeline.destinations import jdbc_modes, write_modes
from portal.pipeline.destinations.commit_steps import CommitSequence, CommitStep
from portal.pipeline.errors import ConfigError
from portal.pipeline.properties import Properties
from tests.builders.servers import mysql
from tests.unit.pipeline.helpers import NOW, run_and_publish, spec, write_csv

DIALECTS = ["postgresql", "mysql"]


class Db:
    """One destination database, spoken to without Flowport's code (what a reader sees)."""

    def __init__(self, dialect: str, pg: psycopg.Connection, pg_database: dict, mysql_database: dict) -> None:
        self.dialect = dialect
        self.pg, self.my = pg, mysql_database
        self.url = pg_database["url"] if dialect == "postgresql" else mysql_database["url"]
        self.user = pg_database["user"] if dialect == "postgresql" else "root"

    def run(self, statement: str) -> None:
        if self.dialect == "postgresql":
            self.pg.execute(statement)
        else:
            mysql(statement, self.my["db"])

    def rows(self, query: str) -> list[tuple[str, ...]]:
        if self.dialect == "postgresql":
            return [
                tuple("NULL" if v is None else str(v) for v in r) for r in self.pg.execute(query).fetchall()
            ]
        return [tuple(line.split("\t")) for line in mysql(query, self.my["db"]).splitlines()]

    def stage(self, table: str, rows: list[tuple[int, str, int, bool]]) -> None:
        """A staging table as the writer leaves it: id, name, updated, deleted."""
        self.run(f"DROP TABLE IF EXISTS {table}")
        self.run(f"CREATE TABLE {table} (id bigint, name varchar(40), updated int, deleted boolean)")
        values = ", ".join(f"({i}, '{n}', {u}, {'TRUE' if d else 'FALSE'})" for i, n, u, d in rows)
        if values:
            self.run(f"INSERT INTO {table} VALUES {values}")  # noqa: S608 - test values

    def step(self, execution: int, mode: str, staging: list[str], rows: int, **extra: Any) -> dict[str, Any]:
        return {
            "type": "jdbc_publish",
            "dataset_urn": "customers",
            "branch": 0,
            "url": self.url,
            "user": self.user,
            "target_table": "wm_customers",
            "marker_table": "wm_marker",
            "staging_tables": staging,
            "rows": rows,
            "execution_id": execution,
            "job_name": "job",
            **write_modes.WriteMode(mode, ["id"], "updated", "deleted").step_fields(),
            **extra,
        }


@pytest.fixture(params=DIALECTS)
def db(request, pg: psycopg.Connection, pg_database: dict, mysql_database: dict) -> Db:
    where = Db(request.param, pg, pg_database, mysql_database)
    where.run("DROP TABLE IF EXISTS wm_customers")
    where.run("DROP TABLE IF EXISTS wm_marker")
    return where


def _publish(step: dict[str, Any]) -> int:
    """The orchestrator's commit: the data step, then (here) a crash before the watermark step,
    and the whole sequence run again as recovery does."""
    done = CommitSequence.from_dicts([step]).run()
    assert CommitSequence.from_dicts([step]).run() == 0
    return done


def test_overwrite_replaces_the_table_and_a_replay_changes_nothing(db: Db) -> None:
    db.stage("wm_s1", [(1, "ann", 1, False), (2, "bob", 1, False), (3, "cid", 1, False)])
    assert _publish(db.step(1, "overwrite", ["wm_s1"], 3)) == 1
    db.stage("wm_s2", [(2, "bobby", 2, False), (4, "dan", 2, False)])
    db.stage("wm_s3", [(5, "eve", 2, False)])
    assert _publish(db.step(2, "overwrite", ["wm_s2", "wm_s3"], 3)) == 1
    assert db.rows("SELECT id, name FROM wm_customers ORDER BY id") == [
        ("2", "bobby"),
        ("4", "dan"),
        ("5", "eve"),
    ]


def test_merge_keeps_the_latest_row_per_key_and_deletes_on_request(db: Db) -> None:
    db.stage("wm_s1", [(1, "ann", 1, False), (2, "bob", 1, False), (3, "cid", 1, False)])
    _publish(db.step(1, "merge", ["wm_s1"], 3))
    # bob renamed twice in one run (the later wins), cid deleted, dan new.
    db.stage(
        "wm_s2", [(2, "bobby", 2, False), (2, "robert", 3, False), (3, "cid", 2, True), (4, "dan", 2, False)]
    )
    assert _publish(db.step(2, "merge", ["wm_s2"], 4)) == 1
    assert db.rows("SELECT id, name FROM wm_customers ORDER BY id") == [
        ("1", "ann"),
        ("2", "robert"),
        ("4", "dan"),
    ]


def test_history_keeps_every_version_with_its_validity(db: Db) -> None:
    db.stage("wm_s1", [(1, "ann", 1, False), (2, "bob", 1, False), (3, "cid", 1, False)])
    _publish(db.step(1, "history", ["wm_s1"], 3))
    # ann unchanged, bob renamed, cid deleted, dan new.
    db.stage(
        "wm_s2", [(1, "ann", 1, False), (2, "bobby", 2, False), (3, "cid", 2, True), (4, "dan", 2, False)]
    )
    assert _publish(db.step(2, "history", ["wm_s2"], 4)) == 1
    rows = db.rows(
        "SELECT id, name, CASE WHEN valid_to IS NULL THEN 'open' ELSE 'closed' END, "
        "CASE WHEN is_current THEN 'current' ELSE 'old' END FROM wm_customers ORDER BY id, valid_from"
    )
    assert rows == [
        ("1", "ann", "open", "current"),
        ("2", "bob", "closed", "old"),
        ("2", "bobby", "open", "current"),
        ("3", "cid", "closed", "old"),
        ("4", "dan", "open", "current"),
    ]
    closed = db.rows("SELECT count(*) FROM wm_customers WHERE valid_to IS NOT NULL AND valid_to < valid_from")
    assert closed == [("0",)]


def test_an_appending_backfill_replaces_its_watermark_range(db: Db) -> None:
    db.stage("wm_s1", [(1, "ann", 1, False), (2, "bob", 2, False), (3, "cid", 3, False)])
    _publish(db.step(1, "append", ["wm_s1"], 3))
    # The backfill reads (1, 2] again: bob comes back corrected, once.
    db.stage("wm_s2", [(2, "bobby", 2, False)])
    span = {"column": "updated", "low": "1", "high": "2"}
    assert _publish(db.step(2, "append", ["wm_s2"], 1, replace_range=span)) == 1
    assert db.rows("SELECT id, name FROM wm_customers ORDER BY id") == [
        ("1", "ann"),
        ("2", "bobby"),
        ("3", "cid"),
    ]


def test_a_postgresql_overwrite_takes_the_staging_table_unless_the_target_has_its_own_definition(
    pg: psycopg.Connection, pg_database: dict, mysql_database: dict
) -> None:
    """A target the publish created is only its rows: the overwrite renames the staging table to it
    (no copy). A target someone gave an index, a grant or a view keeps them: its rows are copied."""
    db = Db("postgresql", pg, pg_database, mysql_database)
    db.run("DROP TABLE IF EXISTS wm_customers CASCADE")
    db.run("DROP TABLE IF EXISTS wm_marker")
    db.stage("wm_s1", [(1, "ann", 1, False), (2, "bob", 1, False)])
    _publish(db.step(1, "overwrite", ["wm_s1"], 2))
    db.stage("wm_s2", [(3, "cid", 2, False)])
    staged = db.rows("SELECT 'wm_s2'::regclass::oid")
    assert _publish(db.step(2, "overwrite", ["wm_s2"], 1)) == 1
    assert db.rows("SELECT 'wm_customers'::regclass::oid") == staged  # the staging table itself
    assert db.rows("SELECT to_regclass('wm_s2') IS NULL") == [("True",)]
    assert db.rows("SELECT id, name FROM wm_customers") == [("3", "cid")]

    db.run("CREATE INDEX wm_customers_name ON wm_customers (name)")
    db.run("CREATE VIEW wm_names AS SELECT name FROM wm_customers")
    db.stage("wm_s3", [(4, "dan", 3, False), (5, "eve", 3, False)])
    db.stage("wm_s4", [(6, "fay", 3, False)])
    before = db.rows("SELECT 'wm_customers'::regclass::oid")
    assert _publish(db.step(3, "overwrite", ["wm_s3", "wm_s4"], 3)) == 1
    assert db.rows("SELECT 'wm_customers'::regclass::oid") == before
    assert db.rows("SELECT name FROM wm_names ORDER BY name") == [("dan",), ("eve",), ("fay",)]
    assert db.rows("SELECT to_regclass('wm_customers_name') IS NOT NULL") == [("True",)]
    db.run("DROP VIEW wm_names")


def test_a_postgresql_merge_rewrites_only_the_rows_that_changed(
    pg: psycopg.Connection, pg_database: dict, mysql_database: dict
) -> None:
    """A run that reads rows again unchanged (a re-run, a backfill) leaves those rows as they are
    stored (no new row version: the same ``xmin``), even in a column with no equality operator
    (json); a changed row, a NULL that became a value and a new key are written."""
    db = Db("postgresql", pg, pg_database, mysql_database)
    db.run("DROP TABLE IF EXISTS wm_customers")
    db.run("DROP TABLE IF EXISTS wm_marker")
    db.stage("wm_s1", [(1, "ann", 1, False), (2, "bob", 1, False), (3, "cid", 1, False)])
    _publish(db.step(1, "merge", ["wm_s1"], 3))
    db.run("ALTER TABLE wm_customers ADD COLUMN doc json")  # the target's own column, kept
    db.run("""UPDATE wm_customers SET doc = '{"a": 1}', name = NULL WHERE id = 3""")
    stored = dict(db.rows("SELECT id, xmin FROM wm_customers"))
    db.stage(
        "wm_s2", [(1, "ann", 1, False), (2, "bobby", 2, False), (3, "cid", 1, False), (4, "dan", 2, False)]
    )
    assert _publish(db.step(2, "merge", ["wm_s2"], 4)) == 1
    now = dict(db.rows("SELECT id, xmin FROM wm_customers"))
    assert now["1"] == stored["1"]  # unchanged: not rewritten
    assert now["2"] != stored["2"] and now["3"] != stored["3"]
    assert db.rows("SELECT id, name, doc::text FROM wm_customers ORDER BY id") == [
        ("1", "ann", "NULL"),
        ("2", "bobby", "NULL"),
        ("3", "cid", '{"a": 1}'),
        ("4", "dan", "NULL"),
    ]


def test_a_publish_that_fails_midway_leaves_the_old_rows(db: Db) -> None:
    db.stage("wm_s1", [(1, "ann", 1, False)])
    _publish(db.step(1, "overwrite", ["wm_s1"], 1))
    db.stage("wm_s2", [(2, "bob", 1, False)])
    step = CommitStep.from_dict(db.step(2, "overwrite", ["wm_s2", "wm_gone"], 1))
    with pytest.raises(Exception, match="wm_gone"):
        step.execute()
    assert db.rows("SELECT id, name FROM wm_customers") == [("1", "ann")]  # not emptied


def test_a_keyed_mode_without_keys_is_refused_naming_the_key() -> None:
    with pytest.raises(
        ConfigError, match=r"writer\.write\.mode.*history needs extract\.primary\.key\.fields"
    ):
        write_modes.resolve(Properties({"writer.write.mode": "history"}), "JDBC")
    with pytest.raises(ConfigError, match="must be one of append, overwrite, merge, history"):
        write_modes.resolve(Properties({"writer.write.mode": "upsert"}), "JDBC")
    with pytest.raises(ConfigError, match="reads PARQUET or CSV only, not JSON"):
        write_modes.resolve(
            Properties({"writer.write.mode": "merge", "extract.primary.key.fields": "id"}), "JSON"
        )


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_flow_with_history_writes_versions_through_spark(
    dialect: str,
    spark: SparkSession,
    pg: psycopg.Connection,
    pg_database: dict,
    mysql_database: dict,
    tmp_path: Path,
) -> None:
    """The whole path: the writer takes writer.write.mode, the plan carries it, the publish keeps
    every version."""
    db = Db(dialect, pg, pg_database, mysql_database)
    db.run("DROP TABLE IF EXISTS wm_people")
    landing = tmp_path / "landing" / "people"
    write_csv(landing / "a.csv", "id,name", ["1,ann", "2,bob"], mtime=NOW - 120)
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "source.schema": "id BIGINT, name STRING",
        "writer.output.format": "JDBC",
        "writer.jdbc.url": db.url,
        "writer.jdbc.username": db.user,
        "writer.jdbc.table": "wm_people",
        "writer.jdbc.marker.table": "wm_people_marker",
        "writer.write.mode": "history",
        "extract.primary.key.fields": "id",
    }
    marks: dict[str, str] = {}
    run_and_publish(spark, spec(tmp_path, props), marks)
    write_csv(landing / "b.csv", "id,name", ["2,bobby", "3,cid"], mtime=NOW - 60)
    run_and_publish(spark, spec(tmp_path, props, execution_id=2), marks)
    rows = db.rows(
        "SELECT id, name, CASE WHEN is_current THEN 'current' ELSE 'old' END FROM wm_people ORDER BY id, valid_from"
    )
    assert rows == [
        ("1", "ann", "current"),
        ("2", "bob", "old"),
        ("2", "bobby", "current"),
        ("3", "cid", "current"),
    ]


@pytest.mark.parametrize("statement", ["merge", "upsert"])
def test_a_postgresql_merge_gives_the_same_rows_by_merge_or_by_upsert(
    statement: str,
    monkeypatch: pytest.MonkeyPatch,
    pg: psycopg.Connection,
    pg_database: dict,
    mysql_database: dict,
) -> None:
    """A run as large as the target is merged by one MERGE, a small one by the upsert: the same
    rows either way, the unchanged ones not rewritten."""
    monkeypatch.setattr(jdbc_modes, "MERGE_SHARE", 0.0 if statement == "merge" else 1e9)
    db = Db("postgresql", pg, pg_database, mysql_database)
    db.run("DROP TABLE IF EXISTS wm_customers")
    db.run("DROP TABLE IF EXISTS wm_marker")
    db.stage("wm_s1", [(1, "ann", 1, False), (2, "bob", 1, False), (3, "cid", 1, False)])
    _publish(db.step(1, "merge", ["wm_s1"], 3))
    db.run("ANALYZE wm_customers")
    stored = dict(db.rows("SELECT id, xmin FROM wm_customers"))
    db.stage(
        "wm_s2",
        [
            (1, "ann", 1, False),
            (2, "bobby", 2, False),
            (2, "robert", 3, False),
            (3, "cid", 2, True),
            (4, "dan", 2, False),
        ],
    )
    seen: list[str] = []
    monkeypatch.setattr(jdbc_modes, "_merge", _watched(jdbc_modes._merge, seen))
    assert _publish(db.step(2, "merge", ["wm_s2"], 5)) == 1
    assert seen == (["MERGE"] if statement == "merge" else [])
    assert db.rows("SELECT id, name FROM wm_customers ORDER BY id") == [
        ("1", "ann"),
        ("2", "robert"),
        ("4", "dan"),
    ]
    assert dict(db.rows("SELECT id, xmin FROM wm_customers"))["1"] == stored["1"]


def _watched(merge: Any, seen: list[str]) -> Any:
    def watched(*args: Any) -> str:
        statement = merge(*args)
        seen.append(statement.split()[0])
        return statement

    return watched


def test_a_key_another_writer_inserts_during_the_merge_is_updated_not_refused(
    monkeypatch: pytest.MonkeyPatch, pg: psycopg.Connection, pg_database: dict, mysql_database: dict
) -> None:
    """MERGE inserts a key it did not see and fails on the unique index when another transaction
    committed it meanwhile: the publish undoes it and upserts instead, so the run's row wins."""
    monkeypatch.setattr(jdbc_modes, "MERGE_SHARE", 0.0)
    db = Db("postgresql", pg, pg_database, mysql_database)
    db.run("DROP TABLE IF EXISTS wm_customers")
    db.run("DROP TABLE IF EXISTS wm_marker")
    db.stage("wm_s1", [(1, "ann", 1, False)])
    _publish(db.step(1, "merge", ["wm_s1"], 1))
    db.stage("wm_s2", [(1, "ann", 2, False), (9, "run nine", 2, False)])
    other = psycopg.connect(**pg_database["conninfo"])
    other.execute("INSERT INTO wm_customers (id, name, updated, deleted) VALUES (9, 'other nine', 1, false)")
    publish = threading.Thread(
        target=lambda: CommitSequence.from_dicts([db.step(2, "merge", ["wm_s2"], 2)]).run()
    )
    publish.start()
    for _ in range(100):  # the MERGE waits on the other writer's key
        waiting = pg.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        ).fetchone()
        if waiting and waiting[0]:
            break
        time.sleep(0.05)
    other.commit()
    other.close()
    publish.join(30)
    assert not publish.is_alive()
    assert db.rows("SELECT id, name FROM wm_customers ORDER BY id") == [("1", "ann"), ("9", "run nine")]
