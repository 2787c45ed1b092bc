"""A database table is read once per work unit: no Parquet stage for one branch or a one-pass fork;
a stage only when the task would read the table twice (branches written one by one, an err file),
and then every branch, the err file and the counts agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from pyspark.sql import SparkSession

from .helpers import read, run_and_publish, spec


def _events(pg: psycopg.Connection, table: str, count: int) -> None:
    pg.execute(f"DROP TABLE IF EXISTS {table}")
    pg.execute(
        f"CREATE TABLE {table} (id bigint PRIMARY KEY, country text, amount numeric(10,2), ts timestamp)"
    )
    pg.execute(
        f"INSERT INTO {table} SELECT i, (ARRAY['NO','SE','DE'])[i % 3 + 1], i * 0.5,"  # noqa: S608 - test table
        f" timestamp '2024-01-01' + i * interval '1 second' FROM generate_series(1, {count}) i"
    )


def _props(db: dict[str, Any], root: Path, table: str, **extra: str) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
        "source.jdbc.url": db["url"],
        "source.conn.username": db["user"],
        "source.jdbc.tables": table,
        "extract.delta.fields": "ts",
        "extract.primary.key.fields": "id",
        "source.jdbc.num.partitions": "2",
        "data.publisher.final.dir": str(root / "lake"),
        **extra,
    }


def _fork(root: Path, **extra: str) -> dict[str, str]:
    return {
        "fork.operator.class": "portal.pipeline.fork.RouteByFieldForkOperator",
        "fork.branches": "2",
        "fork.route.field": "country",
        "fork.route.values.0": "NO",
        "fork.route.values.1": "*",
        "data.publisher.final.dir.0": str(root / "no"),
        "data.publisher.final.dir.1": str(root / "rest"),
        **extra,
    }


def test_a_one_branch_copy_and_its_look_back_run_read_the_table_once_without_a_stage(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    _events(pg, "once_a", 300)
    marks: dict[str, str] = {}
    props = _props(pg_database, tmp_path, "once_a", **{"extract.lookback": "10s"})
    first = run_and_publish(spark, spec(tmp_path, props), marks)
    assert first[0]["extract_staged"] is False
    assert first[0]["records_extracted"] == 300
    pg.execute(  # a late row inside the look-back window, and a new one
        "INSERT INTO once_a VALUES (1000, 'NO', 1, timestamp '2024-01-01' + interval '295 seconds'),"
        " (301, 'NO', 1, timestamp '2024-01-01' + interval '301 seconds')"
    )
    second = run_and_publish(spark, spec(tmp_path, props, execution_id=2), marks)
    assert (second[0]["extract_staged"], second[0]["records_extracted"]) == (False, 2)
    ids = sorted(r.id for r in read(spark, tmp_path / "lake" / "once_a").collect())
    assert ids == [*range(1, 302), 1000]  # the late row caught, the window's rows not delivered twice


def test_a_one_pass_fork_reads_the_table_once_and_branches_written_one_by_one_share_one_stage(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    _events(pg, "once_b", 300)
    one_pass = _props(pg_database, tmp_path / "a", "once_b", **_fork(tmp_path / "a"))
    one_pass.pop("data.publisher.final.dir")
    states = run_and_publish(spark, spec(tmp_path / "a", one_pass), {})
    assert (states[0]["fork_feed"], states[0]["extract_staged"]) == ("one_pass", False)

    one_by_one = _props(
        pg_database, tmp_path / "b", "once_b", **_fork(tmp_path / "b", **{"fork.one.pass": "false"})
    )
    one_by_one.pop("data.publisher.final.dir")
    states = run_and_publish(spark, spec(tmp_path / "b", one_by_one), {})
    assert (states[0]["fork_feed"], states[0]["extract_staged"]) == ("per_branch", True)
    for root in (tmp_path / "a", tmp_path / "b"):
        assert states[0]["records_extracted"] == 300
        assert read(spark, root / "no" / "once_b").count() == 100
        assert read(spark, root / "rest" / "once_b").count() == 200


def test_an_err_file_is_written_from_the_same_stage_the_branch_read(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    _events(pg, "once_c", 30)
    props = _props(
        pg_database,
        tmp_path,
        "once_c",
        **{
            "qualitychecker.row.policies": "RangePolicy",
            "qualitychecker.row.policy.types": "ERR_FILE",
            "qualitychecker.row.range.field": "amount",
            "qualitychecker.row.range.max": "10",
        },
    )
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert states[0]["extract_staged"] is True
    assert states[0]["records_extracted"] == 30 and states[0]["records_rejected"] == 10
    assert read(spark, states[0]["err_dir"], "json").count() == 10
    assert read(spark, tmp_path / "lake" / "once_c").count() == 20
