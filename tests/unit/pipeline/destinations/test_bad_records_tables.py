"""A CSV drop read into a database or an Iceberg table, with two records the source cannot read: they
land in an error table beside the destination table (reason, file and line, the run, the raw
record) with the run's publish, exactly once, and never when the run fails; real PostgreSQL,
MariaDB and an Iceberg catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.destinations.commit_steps import CommitSequence
from portal.pipeline.destinations.commitplan import plan_commit
from portal.pipeline.destinations.iceberg import load_catalog
from tests.builders.servers import mysql
from tests.unit.pipeline.helpers import NOW, spec, write_csv

HEADER = "id,name,amount"
# Six records: a short one (line 4) and a bad double (line 5) among four good ones.
ROWS = ["1,ann,10.5", "2,bob,20.0", "3,cid", "4,dan,lots", "5,eve,50.0", "6,fay,60.0"]


def _drop(tmp_path: Path) -> Path:
    return write_csv(tmp_path / "landing" / "orders" / "a.csv", HEADER, ROWS, mtime=NOW - 60)


def _props(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "source.schema": "id BIGINT, name STRING, amount DOUBLE",
        **extra,
    }


def _steps(job: dict[str, Any], states: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in plan_commit(job, states)["orders"] if s["type"] != "high_watermark"]


def _jdbc(dialect: str, pg_database: dict[str, Any], mysql_database: dict[str, Any]) -> dict[str, str]:
    if dialect == "postgresql":
        return {"writer.jdbc.url": pg_database["url"], "writer.jdbc.username": pg_database["user"]}
    return {"writer.jdbc.url": mysql_database["url"], "writer.jdbc.username": "root"}


def _query(dialect: str, sql: str, pg: psycopg.Connection, mysql_database: dict[str, Any]) -> list[list[str]]:
    if dialect == "postgresql":
        return [[("" if v is None else str(v)) for v in row] for row in pg.execute(sql).fetchall()]
    out = mysql(sql, mysql_database["db"])
    return [["" if v == "NULL" else v for v in line.split("\t")] for line in out.splitlines()]


def _reset(dialect: str, pg: psycopg.Connection, mysql_database: dict[str, Any]) -> None:
    tables = ("bad_orders", "bad_orders_errors", "flowport_publish_marker", "flowport_publish_marker_errors")
    for table in tables:
        if dialect == "postgresql":
            pg.execute(f"DROP TABLE IF EXISTS {table}")
        else:
            mysql(f"DROP TABLE IF EXISTS {table}", mysql_database["db"])


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_bad_rows_of_a_database_destination_land_in_its_error_table_once_with_the_run(
    dialect: str,
    spark: SparkSession,
    pg: psycopg.Connection,
    pg_database: dict[str, Any],
    mysql_database: dict[str, Any],
    tmp_path: Path,
) -> None:
    _reset(dialect, pg, mysql_database)
    source = _drop(tmp_path)
    props = _props(
        tmp_path,
        **_jdbc(dialect, pg_database, mysql_database),
        **{"writer.output.format": "JDBC", "writer.jdbc.table": "bad_orders", "errors.max.count": "2"},
    )
    job = spec(tmp_path, props, execution_id=41)
    states = run_job(spark, job)
    state = states[0]
    assert state["status"] == "SUCCEEDED", state["error"]
    assert state["records_bad"] == 2 and state["records_extracted"] == 4
    assert state["bad_records_files"] == []  # no err folder: the table keeps them
    assert state["bad_records_tables"] == [state["bad_records_tables"][0]]
    assert state["bad_records_tables"][0].startswith("table bad_orders_errors (")
    assert "root" not in state["bad_records_tables"][0]  # the database, never its user

    steps = _steps(job, states)
    assert [(s["type"], s["target_table"]) for s in steps] == [
        ("jdbc_publish", "bad_orders"),
        ("jdbc_publish", "bad_orders_errors"),
    ]
    # A crash after the data's publish: the run's commit again finishes the error table's, once.
    assert CommitSequence.from_dicts(steps[:1], props).run() == 1
    assert _query(dialect, "SELECT count(*) FROM bad_orders", pg, mysql_database) == [["4"]]
    assert CommitSequence.from_dicts(steps, props).run() == 1
    assert CommitSequence.from_dicts(steps, props).run() == 0

    bad = _query(
        dialect,
        "SELECT execution_id, job, task_id, dataset_urn, source_file, line, reason, record "
        "FROM bad_orders_errors ORDER BY line",
        pg,
        mysql_database,
    )
    assert [row[5:] for row in bad] == [
        ["4", "2 field(s), expected 3", "3,cid"],
        ["5", "column 'amount' (double): 'lots' does not parse", "4,dan,lots"],
    ]
    assert {(row[0], row[1], row[2], row[3], row[4]) for row in bad} == {
        ("41", "job", state["task_id"], "orders", str(source))
    }
    staged = steps[1]["staging_tables"][0]
    if dialect == "postgresql":
        assert pg.execute("SELECT to_regclass(%s)", (staged,)).fetchone()[0] is None
    else:
        assert mysql(f"SHOW TABLES LIKE '{staged}'", mysql_database["db"]).strip() == ""


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_past_the_limit_nothing_reaches_the_error_table_and_nothing_is_left_staged(
    dialect: str,
    spark: SparkSession,
    pg: psycopg.Connection,
    pg_database: dict[str, Any],
    mysql_database: dict[str, Any],
    tmp_path: Path,
) -> None:
    _reset(dialect, pg, mysql_database)
    _drop(tmp_path)

    def staged() -> set[str]:  # the session's database is shared: other stories stage there too
        if dialect == "postgresql":
            return {
                r[0] for r in pg.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'fp_stg_%'")
            }
        return set(mysql("SHOW TABLES LIKE 'fp_stg_%'", mysql_database["db"]).split())

    before = staged()
    props = _props(
        tmp_path,
        **_jdbc(dialect, pg_database, mysql_database),
        **{"writer.output.format": "JDBC", "writer.jdbc.table": "bad_orders", "errors.max.fraction": "0.1"},
    )
    job = spec(tmp_path, props, execution_id=42)
    states = run_job(spark, job)
    state = states[0]
    assert state["status"] == "FAILED"
    assert (
        "2 bad record(s) in dataset 'orders'" in state["error"]
        and "errors.max.fraction=0.1" in state["error"]
    )
    assert state["bad_records_tables"] == [] and Path(state["bad_records_files"][0]).is_file()
    assert _steps(job, states) == []
    assert staged() - before == set()


def test_bad_rows_of_an_iceberg_destination_land_in_its_error_table_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = _drop(tmp_path)
    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path / "warehouse"
    props = _props(
        tmp_path,
        **{
            "writer.output.format": "ICEBERG",
            "writer.iceberg.catalog.uri": uri,
            "writer.iceberg.warehouse": str(warehouse),
            "writer.iceberg.namespace": "lake",
            "writer.iceberg.table": "orders",
            "errors.max.count": "2",
        },
    )
    job = spec(tmp_path, props, execution_id=43)
    states = run_job(spark, job)
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    assert states[0]["bad_records_tables"] == ["Iceberg table lake.orders_errors"]

    steps = _steps(job, states)
    assert [(s["type"], s["table"]) for s in steps] == [
        ("iceberg_commit", "orders"),
        ("iceberg_commit", "orders_errors"),
    ]
    assert CommitSequence.from_dicts(steps, props).run() == 2
    assert CommitSequence.from_dicts(steps, props).run() == 0

    catalog = load_catalog(uri, None, str(warehouse))
    data = catalog.load_table(("lake", "orders")).scan().to_arrow()
    assert sorted(data.column("id").to_pylist()) == [1, 2, 5, 6]  # the error file is not data
    bad = catalog.load_table(("lake", "orders_errors")).scan().to_arrow().sort_by("line").to_pylist()
    assert [(r["line"], r["reason"], r["record"]) for r in bad] == [
        (4, "2 field(s), expected 3", "3,cid"),
        (5, "column 'amount' (double): 'lots' does not parse", "4,dan,lots"),
    ]
    assert {(r["execution_id"], r["source_file"]) for r in bad} == {(43, str(source))}


@pytest.mark.parametrize("mode", ["overwrite", "merge", "history"])
def test_a_replacing_files_publish_reads_only_the_data_and_moves_the_bad_records_after_it(
    mode: str, tmp_path: Path
) -> None:
    out = str(tmp_path / "work" / "task-output" / "branch_0")
    props = {
        "data.publisher.final.dir": str(tmp_path / "lake"),
        "writer.write.mode": mode,
        "extract.primary.key.fields": "id",
    }
    state = {
        "task_id": "t0",
        "dataset_urn": "orders",
        "status": "SUCCEEDED",
        "low_watermark": None,
        "actual_high_watermark": "w1",
        "branches": [
            {
                "index": 0,
                "name": "b0",
                "status": "SUCCEEDED",
                "format": "PARQUET",
                "records_written": 4,
                "output_dir": out,
                "final_dir": str(tmp_path / "lake"),
                "output_files": [
                    {"path": f"{out}/part-0.parquet", "size": 10},
                    {"path": f"{out}/_errors/44-t0.jsonl", "size": 5},
                ],
            }
        ],
    }
    steps = plan_commit(spec(tmp_path, props, execution_id=44), [state])["orders"]
    assert [s["type"] for s in steps] == ["fs_replace", "fs_rename", "high_watermark"]
    assert [f["relative"] for f in steps[0]["files"]] == ["part-0.parquet"]  # a merge reads data only
    assert steps[1]["dst"] == str(tmp_path / "lake" / "orders" / "_errors" / "44-t0.jsonl")
