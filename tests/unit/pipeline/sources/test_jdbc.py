"""JDBC source and writer against a real PostgreSQL: incremental runs, skipped tables, late rows with
a look-back window, snapshots, ranges, bad watermark columns, and publishing through a staging table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.destinations.commit_steps import CommitSequence
from portal.pipeline.destinations.commitplan import plan_commit
from tests.builders.pipeline import create_orders, insert_orders, order_rows, orders_props
from tests.unit.pipeline.helpers import NOW, read, run_and_publish, spec, write_csv


def test_incremental_runs_and_a_skipped_table(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    create_orders(pg, "inc_a", order_rows(1, 20))
    create_orders(pg, "inc_b", order_rows(1, 5))
    watermarks: dict[str, str] = {}
    states = run_and_publish(
        spark, spec(tmp_path, orders_props(pg_database, tmp_path, "inc_a,inc_b")), watermarks
    )
    by = {s["dataset_urn"]: s for s in states}
    assert by["inc_a"]["records_extracted"] == 20 and by["inc_b"]["records_extracted"] == 5
    assert watermarks["inc_a"] == "2024-01-01 00:00:20"
    assert by["inc_a"]["stage_progress"]["jobs"] >= 1

    insert_orders(pg, "inc_a", order_rows(21, 3))
    insert_orders(pg, "inc_b", order_rows(6, 2))
    # Run 2 only pulls inc_a (inc_b is skipped); inc_b's watermark must survive.
    states = run_and_publish(
        spark, spec(tmp_path, orders_props(pg_database, tmp_path, "inc_a"), execution_id=2), watermarks
    )
    assert [(s["dataset_urn"], s["records_extracted"]) for s in states] == [("inc_a", 3)]
    assert watermarks["inc_b"] == "2024-01-01 00:00:05"

    states = run_and_publish(
        spark, spec(tmp_path, orders_props(pg_database, tmp_path, "inc_a,inc_b"), execution_id=3), watermarks
    )
    assert {s["dataset_urn"]: s["records_extracted"] for s in states} == {"inc_a": 0, "inc_b": 2}
    a = read(spark, tmp_path / "lake" / "inc_a").collect()
    b = read(spark, tmp_path / "lake" / "inc_b").collect()
    assert sorted(r.id for r in a) == list(range(1, 24))  # every row exactly once
    assert sorted(r.id for r in b) == list(range(1, 8))


def test_late_rows_are_caught_by_the_lookback_window_without_duplicates(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    create_orders(pg, "late", order_rows(1, 10))  # updated_at 00:00:01 .. 00:00:10
    plain_marks: dict[str, str] = {}
    look_marks: dict[str, str] = {}
    plain = orders_props(pg_database, tmp_path / "plain", "late")
    look = orders_props(pg_database, tmp_path / "look", "late", **{"extract.lookback": "5s"})
    run_and_publish(spark, spec(tmp_path / "plain", plain), plain_marks)
    run_and_publish(spark, spec(tmp_path / "look", look), look_marks)
    assert plain_marks["late"] == "2024-01-01 00:00:10"

    # A transaction that stamped its row at 00:00:08 commits only now (after both runs read past it),
    # and a normal new row arrives.
    insert_orders(
        pg, "late", [(100, "late", 1.0, "2024-01-01 00:00:08"), (11, "new", 2.0, "2024-01-01 00:00:11")]
    )
    run_and_publish(spark, spec(tmp_path / "plain", plain, execution_id=2), plain_marks)
    states = run_and_publish(spark, spec(tmp_path / "look", look, execution_id=2), look_marks)

    plain_ids = sorted(r.id for r in read(spark, tmp_path / "plain" / "lake" / "late").collect())
    look_ids = sorted(r.id for r in read(spark, tmp_path / "look" / "lake" / "late").collect())
    assert 100 not in plain_ids  # without a look-back the late row is lost
    assert look_ids == [*range(1, 12), 100]  # with it: caught, and rows 6..10 not delivered twice
    assert states[0]["records_extracted"] == 2

    # Third run, nothing new: the window is re-read but nothing is delivered again.
    states = run_and_publish(spark, spec(tmp_path / "look", look, execution_id=3), look_marks)
    assert states[0]["records_extracted"] == 0
    assert read(spark, tmp_path / "look" / "lake" / "late").count() == 12


def test_snapshot_mode_reads_the_whole_table_every_run(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    create_orders(pg, "snap", order_rows(1, 4))
    props = orders_props(pg_database, tmp_path, "snap", **{"extract.is.full": "true"})
    props.pop("extract.delta.fields")
    marks: dict[str, str] = {}
    first = run_and_publish(spark, spec(tmp_path, props), marks)
    insert_orders(pg, "snap", order_rows(5, 1))
    second = run_and_publish(spark, spec(tmp_path, props, execution_id=2), marks)
    assert first[0]["records_extracted"] == 4
    assert second[0]["records_extracted"] == 5
    assert marks["snap"] == "snapshot@2"


def test_missing_watermark_column_fails_the_task_and_publishes_nothing(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    create_orders(pg, "nowm", order_rows(1, 3))
    job = spec(
        tmp_path, orders_props(pg_database, tmp_path, "nowm", **{"extract.delta.fields": "modified_at"})
    )
    states = run_job(spark, job)
    assert states[0]["status"] == "FAILED"
    assert "watermark column 'modified_at'" in states[0]["error"] and "'nowm'" in states[0]["error"]
    plan = plan_commit(job, states)
    assert [s["type"] for s in plan.get("nowm", [])] == []  # no data, no watermark (first run)
    assert not (tmp_path / "lake").exists()


def test_failure_in_the_middle_range_keeps_the_watermark_at_the_last_completed_range(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    pg.execute("DROP TABLE IF EXISTS ranged")
    pg.execute("CREATE TABLE ranged (id bigint PRIMARY KEY, seq int, qty text)")
    with pg.cursor() as cur:
        cur.executemany(
            "INSERT INTO ranged VALUES (%s, %s, %s)",
            [(i, i, "x" if i == 15 else str(i)) for i in range(1, 31)],
        )
    props = orders_props(
        pg_database,
        tmp_path,
        "ranged",
        **{
            "extract.delta.fields": "seq",
            "source.jdbc.ranges": "3",
            "mr.job.max.mappers": "1",
            "converter.classes": "CastFieldsConverter",
            "converter.cast.fields": "qty:int",
            "job.commit.policy": "successful",
        },
    )
    marks: dict[str, str] = {}
    states = run_and_publish(spark, spec(tmp_path, props), marks)
    assert [(s["low_watermark"], s["expected_high_watermark"], s["status"]) for s in states] == [
        (None, "10", "SUCCEEDED"),
        ("10", "20", "FAILED"),
        ("20", "30", "CANCELLED"),
    ]
    assert "CAST_INVALID_INPUT" in states[1]["error"]
    # The attempt's log gets the whole traceback: where in the task, and the JVM's error.
    assert states[1]["traceback"].startswith("Traceback (most recent call last):")
    assert "in run\n" in states[1]["traceback"] and "CAST_INVALID_INPUT" in states[1]["traceback"]
    assert states[0]["traceback"] is None and states[2]["traceback"] is None
    assert states[0]["multi_work_unit"]["size"] == 3
    assert marks["ranged"] == "10"
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "ranged").collect()) == list(range(1, 11))

    pg.execute("UPDATE ranged SET qty = '15' WHERE id = 15")
    states = run_and_publish(spark, spec(tmp_path, props, execution_id=2), marks)
    assert [s["status"] for s in states] == ["SUCCEEDED"] * 3
    assert marks["ranged"] == "30"
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "ranged").collect()) == list(range(1, 31))


def test_jdbc_writer_publishes_through_a_staging_table_exactly_once(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    pg.execute("DROP TABLE IF EXISTS sink_orders")
    write_csv(tmp_path / "landing" / "orders" / "a.csv", "id,name", ["1,a", "2,b", "3,c"], mtime=NOW - 60)
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "source.schema": "id INT, name STRING",
        "writer.output.format": "JDBC",
        "writer.jdbc.url": pg_database["url"],
        "writer.jdbc.username": pg_database["user"],
        "writer.jdbc.password": "unused-secret",
        "writer.jdbc.table": "sink_orders",
    }
    job = spec(tmp_path, props, execution_id=7)
    states = run_job(spark, job)
    branch = states[0]["branches"][0]
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    assert branch["staging_table"].startswith("fp_stg_") and branch["records_written"] == 3
    steps = plan_commit(job, states)["orders"]
    publish = [s for s in steps if s["type"] == "jdbc_publish"]
    assert len(publish) == 1 and "unused-secret" not in str(publish)
    assert publish[0]["password_property"] == "writer.jdbc.password"

    sequence = CommitSequence.from_dicts(publish, props)
    assert sequence.run() == 1
    assert CommitSequence.from_dicts(publish, props).run() == 0  # second run: verified, nothing done
    assert pg.execute("SELECT count(*) FROM sink_orders").fetchone()[0] == 3
    marker = pg.execute(
        "SELECT execution_id, job_name, dataset_urn, rows FROM flowport_publish_marker"
    ).fetchall()
    assert (7, "job", "orders", 3) in marker
    assert pg.execute("SELECT to_regclass(%s)", (branch["staging_table"],)).fetchone()[0] is None


def test_first_run_of_a_table_whose_rows_share_one_watermark_value_reads_them(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    # min = max of the watermark column: the range split has no inner boundary, the run must still
    # read (None, max] instead of planning nothing (the rows would wait for a second distinct value).
    create_orders(pg, "one_ts", [(1, "a", 1.0, "2024-01-01 00:00:00"), (2, "b", 2.0, "2024-01-01 00:00:00")])
    marks: dict[str, str] = {}
    states = run_and_publish(spark, spec(tmp_path, orders_props(pg_database, tmp_path, "one_ts")), marks)
    assert [(s["status"], s["records_extracted"]) for s in states] == [("SUCCEEDED", 2)]
    assert marks["one_ts"] == "2024-01-01 00:00:00"
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "one_ts").collect()) == [1, 2]
