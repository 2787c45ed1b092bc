"""A whole schema copied table by table: ``writer.jdbc.table=copy_{table}`` lands every table a
pattern matches in its own target, exactly once over incremental runs (append and upsert), on the
real PostgreSQL and MariaDB servers; a table whose name is not a plain identifier never names one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from portal.pipeline.destinations import table_templates
from portal.pipeline.destinations.commit_steps import CommitSequence
from portal.pipeline.destinations.commitplan import plan_commit
from portal.pipeline.destinations.iceberg import table_spec
from portal.pipeline.errors import ConfigError
from portal.pipeline.jobcheck import job_property_problems
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.properties import Properties
from portal.pipeline.taskstate import SUCCEEDED
from tests.builders.pipeline import run
from tests.builders.servers import MYSQL_HOST, MYSQL_PORT, mysql
from tests.unit.pipeline.helpers import spec

# Two tables of different shapes: each target must take its own table's columns.
EU = "CREATE TABLE {name} (id BIGINT PRIMARY KEY, city VARCHAR(20), updated_at {ts})"
US = "CREATE TABLE {name} (id BIGINT PRIMARY KEY, state VARCHAR(20), total INT, updated_at {ts})"
EU_ROWS = "INSERT INTO {name} VALUES (1, 'paris', '2024-01-01 00:00:01'), (2, 'rome', '2024-01-01 00:00:02')"
US_ROWS = (
    "INSERT INTO {name} VALUES (1, 'ny', 10, '2024-01-01 00:00:01'), (2, 'tx', 20, '2024-01-01 00:00:02'), "
    "(3, 'ca', 30, '2024-01-01 00:00:03')"
)
MORE = (
    "INSERT INTO {eu} VALUES (3, 'oslo', '2024-01-02 00:00:00')",
    "UPDATE {us} SET total = 21, updated_at = '2024-01-02 00:00:00' WHERE id = 2",
)


def _props(url: str, user: str, tables: str, mode: str, tmp_path: Path) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
        "source.jdbc.url": url,
        "source.conn.username": user,
        "source.jdbc.tables": tables,
        "extract.delta.fields": "updated_at",
        "extract.primary.key.fields": "id",
        "job.commit.policy": "partial",
        "writer.output.format": "JDBC",
        "writer.jdbc.url": url,
        "writer.jdbc.username": user,
        "writer.jdbc.table": "copy_{table}",
        "writer.jdbc.write.mode": mode,
        "data.publisher.final.dir": str(tmp_path / "unused"),
    }


def _two_runs(spark: SparkSession, props: dict[str, str], tmp_path: Path, more: Any) -> None:
    """The first run copies both tables; rows arrive; the second run copies only them, and running
    its commit again changes nothing."""
    state: dict[str, dict[str, str]] = {"watermarks": {}, "schemas": {}}
    first = run(spark, spec(tmp_path, props, 1), state)
    assert {u: s["status"] for u, s in first.items()} == {u: SUCCEEDED for u in first}, first
    more()
    job = spec(tmp_path, props, 2)
    second = run(spark, job, state)
    assert {u: s["records_extracted"] for u, s in second.items()} == {u: 1 for u in second}
    again = [s for steps in plan_commit(job, list(second.values())).values() for s in steps]
    assert CommitSequence.from_dicts([s for s in again if s["type"] == "jdbc_publish"], props).run() == 0


def _expected(mode: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    eu = [(1, "paris"), (2, "rome"), (3, "oslo")]
    us = [(1, "ny", 10), (2, "tx", 20), (2, "tx", 21), (3, "ca", 30)]  # append: row 2's new version too
    return eu, [r for r in us if r != (2, "tx", 20)] if mode == "upsert" else us


@pytest.mark.parametrize("mode", ["append", "upsert"])
def test_each_postgresql_table_lands_in_its_own_target_once(
    mode: str, spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    pg.execute("DROP SCHEMA IF EXISTS tt CASCADE")
    pg.execute("CREATE SCHEMA tt")
    pg.execute("DROP TABLE IF EXISTS copy_orders_eu, copy_orders_us, flowport_publish_marker")
    for ddl, rows, name in ((EU, EU_ROWS, "tt.orders_eu"), (US, US_ROWS, "tt.orders_us")):
        pg.execute(ddl.format(name=name, ts="timestamp"))
        pg.execute(rows.format(name=name))
    props = _props(pg_database["url"], pg_database["user"], "tt.orders_*", mode, tmp_path)
    staging = "SELECT tablename FROM pg_tables WHERE tablename LIKE 'fp_stg_%'"
    # The database is shared with other stories, which may leave theirs (a crash story's on purpose).
    before = {r[0] for r in pg.execute(staging)}

    def more() -> None:
        for statement in MORE:
            pg.execute(statement.format(eu="tt.orders_eu", us="tt.orders_us"))

    _two_runs(spark, props, tmp_path, more)
    eu, us = _expected(mode)
    assert pg.execute("SELECT id, city FROM copy_orders_eu ORDER BY id").fetchall() == eu
    assert pg.execute("SELECT id, state, total FROM copy_orders_us ORDER BY id, total").fetchall() == us
    columns = "SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY 1"
    assert [r[0] for r in pg.execute(columns, ("copy_orders_eu",))] == ["city", "id", "updated_at"]
    markers = pg.execute(
        "SELECT dataset_urn, target_table, count(*) FROM flowport_publish_marker GROUP BY 1, 2 ORDER BY 1"
    ).fetchall()
    assert markers == [("tt.orders_eu", "copy_orders_eu", 2), ("tt.orders_us", "copy_orders_us", 2)]
    assert {r[0] for r in pg.execute(staging)} - before == set()  # none of its own staging tables is left


@pytest.mark.parametrize("mode", ["append", "upsert"])
def test_each_mariadb_table_lands_in_its_own_target_once(
    mode: str, spark: SparkSession, tmp_path: Path
) -> None:
    db = "flowport_table_templates"
    mysql(f"DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}")
    for ddl, rows, name in ((EU, EU_ROWS, "orders_eu"), (US, US_ROWS, "orders_us")):
        mysql(f"{ddl.format(name=name, ts='DATETIME')}; {rows.format(name=name)}", db)
    url = f"jdbc:mariadb://{MYSQL_HOST}:{MYSQL_PORT}/{db}"
    props = _props(url, "root", "orders_*", mode, tmp_path)
    try:
        _two_runs(
            spark, props, tmp_path, lambda: mysql("; ".join(MORE).format(eu="orders_eu", us="orders_us"), db)
        )
        eu, us = _expected(mode)
        cells = mysql("SELECT id, city FROM copy_orders_eu ORDER BY id", db).split()
        assert [(int(cells[i]), cells[i + 1]) for i in range(0, len(cells), 2)] == eu
        cells = mysql("SELECT id, state, total FROM copy_orders_us ORDER BY id, total", db).split()
        assert [(int(cells[i]), cells[i + 1], int(cells[i + 2])) for i in range(0, len(cells), 3)] == us
        markers = mysql(
            "SELECT dataset_urn, target_table, count(*) FROM flowport_publish_marker GROUP BY 1, 2 ORDER BY 1",
            db,
        ).split()
        assert markers == ["orders_eu", "copy_orders_eu", "2", "orders_us", "copy_orders_us", "2"]
        assert mysql("SHOW TABLES LIKE 'fp\\_stg\\_%'", db).strip() == ""
    finally:
        mysql(f"DROP DATABASE IF EXISTS {db}")


def test_a_table_named_with_sql_never_names_a_target(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    """A table in the source schema named like an attack fails alone (partial policy): the source
    refuses the name outright, and a name the source can read but that is not a plain identifier
    is refused by the writer before anything is read; the other table lands in its own target."""
    pg.execute("DROP SCHEMA IF EXISTS tq CASCADE")
    pg.execute("CREATE SCHEMA tq")
    pg.execute("DROP TABLE IF EXISTS safe_orders_eu")
    attack = 'orders_x"; DROP TABLE safe_orders_eu; --'
    for name in ("tq.orders_eu", f'tq."{attack.replace(chr(34), chr(34) * 2)}"', "tq.orders_$x"):
        pg.execute(EU.format(name=name, ts="timestamp"))
        pg.execute(EU_ROWS.format(name=name))
    props = {
        **_props(pg_database["url"], pg_database["user"], "tq.orders_*", "append", tmp_path),
        "writer.jdbc.table": "safe_{table}",
    }
    state: dict[str, dict[str, str]] = {"watermarks": {}, "schemas": {}}
    states = run(spark, spec(tmp_path, props, 1), state)
    assert states["tq.orders_eu"]["status"] == SUCCEEDED
    quoted = attack.replace('"', '""')  # the pattern names it as SQL must: quoted, its quote doubled
    assert "not a valid SQL identifier" in states[f'tq."{quoted}"']["error"]
    refused = states["tq.orders_$x"]["error"]
    assert "'writer.jdbc.table'" in refused and "cannot name a table after 'orders_$x'" in refused, refused
    assert pg.execute("SELECT id, city FROM safe_orders_eu ORDER BY id").fetchall() == [
        (1, "paris"),
        (2, "rome"),
    ]
    made = pg.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'safe_%' ORDER BY 1").fetchall()
    assert made == [("safe_orders_eu",)]


def test_the_publish_plan_checks_the_name_again(tmp_path: Path) -> None:
    """A task state does not choose where rows go: a forged dataset name is refused at planning too."""
    props = {
        "writer.output.format": "JDBC",
        "writer.jdbc.url": "jdbc:sqlite:/x.db",
        "writer.jdbc.table": "c_{table}",
    }
    forged = {
        "task_id": "t1",
        "dataset_urn": "x; DROP TABLE users",
        "status": SUCCEEDED,
        "low_watermark": None,
        "actual_high_watermark": "1",
        "branches": [
            {
                "index": 0,
                "name": "fork_0",
                "status": SUCCEEDED,
                "staging_table": "fp_stg_1",
                "records_written": 1,
            }
        ],
    }
    with pytest.raises(ConfigError, match="cannot name a table after 'x; DROP TABLE users'"):
        plan_commit(spec(tmp_path, props), [forged])


@pytest.mark.parametrize(
    ("template", "urn", "table"),
    [
        ("copy_{table}", "public.orders", "copy_orders"),
        ("analytics.{table}", "orders_eu", "analytics.orders_eu"),
        ("{table}_{table}", "a", "a_a"),
        ("plain", "any thing; at all", "plain"),  # no placeholder: the name as written, as before
    ],
)
def test_the_placeholder_is_the_datasets_table_name(template: str, urn: str, table: str) -> None:
    assert table_templates.resolve(template, urn, "'writer.jdbc.table'") == table


@pytest.mark.parametrize(
    "urn", ["s.a-b", "s.1st", "s.naïve", 's."q"', "s.a b", "s.`x`", "s." + "x" * 60, "s."]
)
def test_only_a_plain_identifier_is_put_in(urn: str) -> None:
    with pytest.raises(ConfigError, match=r"'writer\.jdbc\.table'"):
        table_templates.resolve("copy_{table}", urn, "'writer.jdbc.table'")


def test_the_save_refuses_unknown_placeholders_and_stray_braces() -> None:
    problems = table_templates.template_problems
    assert problems("copy_{table}", "k") == []
    assert problems("${prefix}_{table}", "k") == []  # a template substitution is not a placeholder
    assert problems("copy_{tabel}", "k") == ["k: unknown placeholder '{tabel}' (known: {table})"]
    assert problems("copy_{table", "k") == ["k: a '{' or '}' outside a placeholder such as {table}"]


def test_an_iceberg_table_takes_the_placeholder_too(tmp_path: Path) -> None:
    job = JobSpec.from_dict(spec(tmp_path, {}))
    assert (
        table_spec(Properties({"writer.iceberg.table": "raw_{table}"}), job, "shop.orders")["table"]
        == "raw_orders"
    )
    with pytest.raises(ConfigError, match=r"'writer\.iceberg\.table'"):
        table_spec(Properties({"writer.iceberg.table": "raw_{table}"}), job, "shop.../etc")


def test_a_mixed_case_postgresql_target_is_found_again_by_the_next_upsert(
    pg: psycopg.Connection, pg_database: dict[str, Any]
) -> None:
    """``{table}`` keeps a source table's case (MariaDB's ``Orders``): the publish step quotes the
    target when it looks it up, as when it creates it, so the second run's upsert and schema
    evolution find the table the first made instead of making its index and columns again."""
    pg.execute('DROP TABLE IF EXISTS "Copy_Mixed", fp_stg_mixed1, fp_stg_mixed2, mixed_marker')
    for execution, rows in ((1, "(1, 'a'), (2, 'b')"), (2, "(2, 'bb'), (3, 'c')")):
        pg.execute(f"CREATE TABLE fp_stg_mixed{execution} (id bigint, v text)")
        pg.execute(f"INSERT INTO fp_stg_mixed{execution} VALUES {rows}")  # noqa: S608
        step = {
            "type": "jdbc_publish",
            "dataset_urn": "shop.Mixed",
            "url": pg_database["url"],
            "user": pg_database["user"],
            "target_table": "Copy_Mixed",
            "marker_table": "mixed_marker",
            "staging_tables": [f"fp_stg_mixed{execution}"],
            "rows": 2,
            "execution_id": execution,
            "job_name": "job",
            "merge_keys": ["id"],
            "evolve": True,
        }
        assert CommitSequence.from_dicts([step]).run() == 1
    assert pg.execute('SELECT id, v FROM "Copy_Mixed" ORDER BY id').fetchall() == [
        (1, "a"),
        (2, "bb"),
        (3, "c"),
    ]


def test_the_save_judges_the_placeholder_of_both_destinations() -> None:
    jdbc = {"writer.output.format": "JDBC", "writer.jdbc.table": "analytics.{table}"}
    lake = {"writer.output.format": "ICEBERG", "writer.iceberg.table": "raw_{table}"}
    assert job_property_problems(jdbc) == [] and job_property_problems(lake) == []
    [refused] = job_property_problems({**lake, "writer.iceberg.table": "raw_{name}"})
    assert "'writer.iceberg.table'" in refused and "unknown placeholder '{name}'" in refused
