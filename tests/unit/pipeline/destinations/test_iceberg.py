"""An Iceberg destination on a real SQL catalog (SQLite and PostgreSQL) with real Spark runs: a JDBC
table's rows land in an Iceberg table in one commit carrying the run's watermark, are read back
exactly with pyiceberg and pyarrow, are never committed twice, and merge on the key."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.destinations.commit_steps import CommitSequence, CommitStep
from portal.pipeline.destinations.commitplan import plan_commit
from portal.pipeline.destinations.iceberg import (
    committed_watermarks,
    load_catalog,
    uri_has_password,
    with_password,
)
from portal.pipeline.errors import ConfigError
from tests.builders.servers import PG_DB, PG_HOST, PG_PORT, PG_USER
from tests.unit.pipeline.helpers import NOW, publish, spec, write_csv

CATALOG_DB = f"{PG_DB}_iceberg"


@pytest.fixture(scope="module")
def pg_catalog_uri() -> Iterator[str]:
    """A PostgreSQL database of its own holding the Iceberg catalog's tables."""
    with psycopg.connect(
        host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{CATALOG_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{CATALOG_DB}"')
    yield f"postgresql+psycopg://{PG_USER}@{PG_HOST}:{PG_PORT}/{CATALOG_DB}"
    with psycopg.connect(
        host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{CATALOG_DB}" WITH (FORCE)')


def _trips(pg: psycopg.Connection, table: str, start: int, count: int, fare_base: str = "7.25") -> None:
    """Taxi-like trips: bigint id, text, numeric(12,2), timestamptz (the watermark), a smallint."""
    pg.execute(
        f"CREATE TABLE IF NOT EXISTS {table} (id bigint PRIMARY KEY, zone text, fare numeric(12,2), "
        "picked_up timestamptz NOT NULL, passengers smallint)"
    )
    rows = [
        (
            i,
            f"zone-{i % 7}",
            decimal.Decimal(fare_base) + decimal.Decimal(i) / 100,
            dt.datetime(2024, 3, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i),
            i % 5,
        )
        for i in range(start, start + count)
    ]
    with pg.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "  # noqa: S608
            "zone = EXCLUDED.zone, fare = EXCLUDED.fare, picked_up = EXCLUDED.picked_up",
            rows,
        )


def _props(db: dict[str, Any], catalog_uri: str, warehouse: Path, table: str, **extra: str) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
        "source.jdbc.url": db["url"],
        "source.conn.username": db["user"],
        "source.jdbc.tables": table,
        "extract.delta.fields": "picked_up",
        "extract.primary.key.fields": "id",
        "source.jdbc.num.partitions": "2",
        "writer.output.format": "ICEBERG",
        "writer.iceberg.catalog.uri": catalog_uri,
        "writer.iceberg.warehouse": str(warehouse),
        "writer.iceberg.namespace": "lake",
        **extra,
    }


def _source_rows(pg: psycopg.Connection, table: str) -> list[tuple]:
    query = f"SELECT id, zone, fare, picked_up, passengers FROM {table} ORDER BY id"  # noqa: S608
    return [tuple(r) for r in pg.execute(query)]


def _lake_rows(table: Any) -> list[tuple]:
    arrow = table.scan().to_arrow().sort_by("id")
    return [(r["id"], r["zone"], r["fare"], r["picked_up"], r["passengers"]) for r in arrow.to_pylist()]


def _catalog_uri(kind: str, tmp_path: Path, pg_catalog_uri: str) -> str:
    return f"sqlite:///{tmp_path / 'catalog.db'}" if kind == "sqlite" else pg_catalog_uri


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_runs_append_to_an_iceberg_table_once_each_with_their_watermark(
    kind: str,
    spark: SparkSession,
    pg: psycopg.Connection,
    pg_database: dict[str, Any],
    pg_catalog_uri: str,
    tmp_path: Path,
) -> None:
    table = f"trips_append_{kind}"
    pg.execute(f"DROP TABLE IF EXISTS {table}")
    _trips(pg, table, 1, 500)
    uri, warehouse = _catalog_uri(kind, tmp_path, pg_catalog_uri), tmp_path / "warehouse"
    props = _props(pg_database, uri, warehouse, table, **{"writer.iceberg.table": f"t_{kind}"})
    marks: dict[str, str] = {}
    job = spec(tmp_path, props, execution_id=11)
    job["previous_watermarks"] = {}
    states = run_job(spark, job)
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    plan = publish(job, states, marks)
    assert [s["type"] for s in plan[table]] == ["iceberg_commit", "high_watermark"]

    catalog = load_catalog(uri, None, str(warehouse))
    lake = catalog.load_table(("lake", f"t_{kind}"))
    assert _lake_rows(lake) == _source_rows(pg, table)
    fields = {f.name: str(f.field_type) for f in lake.schema().fields}
    assert fields == {
        "id": "long",
        "zone": "string",
        "fare": "decimal(12, 2)",
        "picked_up": "timestamptz",
        "passengers": "int",
    }
    summary = lake.current_snapshot().summary.additional_properties
    assert summary["flowport.execution-id"] == "11" and summary["flowport.rows"] == "500"
    assert summary["flowport.watermark"] == marks[table] == "2024-03-01 08:20:00+00"
    # Every data file sits in the table's own folder, as standard Parquet (UTC microseconds).
    files = [f.file.file_path for f in lake.scan().plan_files()]
    assert files and all(p.startswith(lake.location() + "/data/flowport-job-11-") for p in files)
    ts = pq.read_schema(files[0].removeprefix("file://")).field("picked_up").type
    assert ts == pa.timestamp("us", tz="UTC")

    # The same commit again changes nothing: the table itself says the run landed.
    steps = [s for s in plan[table] if s["type"] == "iceberg_commit"]
    assert CommitSequence.from_dicts(steps, props, table).run() == 0
    assert len(catalog.load_table(("lake", f"t_{kind}")).metadata.snapshots) == 1

    _trips(pg, table, 501, 40)
    job = spec(tmp_path, props, execution_id=12)
    job["previous_watermarks"] = dict(marks)
    states = run_job(spark, job)
    assert states[0]["records_extracted"] == 40
    publish(job, states, marks)
    lake = catalog.load_table(("lake", f"t_{kind}"))
    assert _lake_rows(lake) == _source_rows(pg, table)  # 540 rows, each once
    assert committed_watermarks(props, "job", "tests/pipeline") == {table: (12, "2024-03-01 09:00:00+00")}


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_crash_between_the_iceberg_commit_and_the_state_store_publishes_nothing_twice(
    kind: str,
    spark: SparkSession,
    pg: psycopg.Connection,
    pg_database: dict[str, Any],
    pg_catalog_uri: str,
    tmp_path: Path,
) -> None:
    table = f"trips_crash_{kind}"
    pg.execute(f"DROP TABLE IF EXISTS {table}")
    _trips(pg, table, 1, 300)
    uri, warehouse = _catalog_uri(kind, tmp_path, pg_catalog_uri), tmp_path / "warehouse"
    props = _props(
        pg_database,
        uri,
        warehouse,
        table,
        **{"writer.iceberg.table": f"c_{kind}", "writer.iceberg.namespace": "crash"},
    )
    job = spec(tmp_path, props, execution_id=21)
    states = run_job(spark, job)
    plan = plan_commit(job, states)[table]
    iceberg_step = CommitStep.from_dict(plan[0], props)
    iceberg_step.execute()
    # ... the worker dies here: the state store never got the watermark, the commit-step log is lost.
    state_store: dict[str, str] = {}
    # A retry of the same commit (the log survived) sees the run in the table and does nothing:
    assert CommitStep.from_dict(plan[0], props).verify()
    # Without the log, the next run takes its low watermark from the table, not from the empty store.
    recovered = committed_watermarks(props, "job", "tests/pipeline")
    assert recovered == {table: (21, "2024-03-01 05:00:00+00")}
    state_store.update({urn: value for urn, (_, value) in recovered.items()})
    _trips(pg, table, 301, 10)
    job = spec(tmp_path, props, execution_id=22)
    job["previous_watermarks"] = dict(state_store)
    states = run_job(spark, job)
    assert states[0]["records_extracted"] == 10
    publish(job, states, state_store)
    lake = load_catalog(uri, None, str(warehouse)).load_table(("crash", f"c_{kind}"))
    assert _lake_rows(lake) == _source_rows(pg, table)  # 310 rows, none twice
    assert state_store[table] == "2024-03-01 05:10:00+00"


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_merge_on_key_replaces_updated_rows(
    kind: str,
    spark: SparkSession,
    pg: psycopg.Connection,
    pg_database: dict[str, Any],
    pg_catalog_uri: str,
    tmp_path: Path,
) -> None:
    table = f"trips_merge_{kind}"
    pg.execute(f"DROP TABLE IF EXISTS {table}")
    _trips(pg, table, 1, 200)
    uri, warehouse = _catalog_uri(kind, tmp_path, pg_catalog_uri), tmp_path / "warehouse"
    props = _props(
        pg_database,
        uri,
        warehouse,
        table,
        **{"writer.iceberg.table": f"m_{kind}", "writer.iceberg.write.mode": "merge"},
    )
    marks: dict[str, str] = {}
    job = spec(tmp_path, props, execution_id=31)
    job["previous_watermarks"] = {}
    publish(job, run_job(spark, job), marks)
    # Rows 150..199 updated (new fare, a later pick-up), rows 201..250 new.
    _trips(pg, table, 150, 50, fare_base="99.00")
    _trips(pg, table, 201, 50)
    pg.execute(f"UPDATE {table} SET picked_up = picked_up + interval '1 day' WHERE id BETWEEN 150 AND 199")  # noqa: S608
    job = spec(tmp_path, props, execution_id=32)
    job["previous_watermarks"] = dict(marks)
    states = run_job(spark, job)
    assert states[0]["records_extracted"] == 100
    plan = publish(job, states, marks)
    lake = load_catalog(uri, None, str(warehouse)).load_table(("lake", f"m_{kind}"))
    rows = _lake_rows(lake)
    assert rows == _source_rows(pg, table)  # 250 rows: the 50 updated ones replaced, no duplicate
    assert rows[149][2] == decimal.Decimal("100.50")
    assert CommitSequence.from_dicts([plan[table][0]], props, table).run() == 0
    summaries = [s.summary.additional_properties for s in lake.metadata.snapshots]
    assert {s.get("flowport.execution-id") for s in summaries} == {"31", "32"}


def test_iceberg_configuration_is_checked_before_reading(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    pg.execute("DROP TABLE IF EXISTS trips_config")
    _trips(pg, "trips_config", 1, 3)
    props = _props(
        pg_database,
        f"sqlite:///{tmp_path / 'c.db'}",
        tmp_path / "wh",
        "trips_config",
        **{"writer.iceberg.write.mode": "merge", "extract.primary.key.fields": ""},
    )
    states = run_job(spark, spec(tmp_path, props))
    assert states[0]["status"] == "FAILED"
    assert "merge needs extract.primary.key.fields" in states[0]["error"]
    props.update({"extract.primary.key.fields": "id", "writer.iceberg.table": "../escape"})
    assert "must be a plain name" in run_job(spark, spec(tmp_path, props))[0]["error"]
    assert not (tmp_path / "wh").exists()  # nothing written


def test_the_catalog_password_stays_out_of_the_url_and_the_step() -> None:
    uri = "postgresql+psycopg://lake@db.example.org:5432/catalog"
    assert not uri_has_password(uri)
    assert uri_has_password("postgresql+psycopg://lake:hunter2@db.example.org/catalog")
    assert (
        with_password(uri, "s3cr:t@") == "postgresql+psycopg://lake:s3cr%3At%40@db.example.org:5432/catalog"
    )
    step = CommitStep.from_dict(
        {
            "type": "iceberg_commit",
            "catalog_uri": uri,
            "password_property": "writer.iceberg.catalog.password",
            "warehouse": "/lake",
            "namespace": "n",
            "table": "t",
            "execution_id": 1,
            "job_name": "j",
        },
        {"writer.iceberg.catalog.password": "hunter2"},
    )
    assert "hunter2" not in json.dumps(step.to_dict())
    with pytest.raises(ConfigError, match="missing namespace"):
        CommitStep.from_dict(
            {
                "type": "iceberg_commit",
                "catalog_uri": uri,
                "warehouse": "/w",
                "table": "t",
                "execution_id": 1,
                "job_name": "j",
            }
        )


def test_a_fork_publishes_files_on_one_branch_and_an_iceberg_table_on_the_other(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_csv(
        tmp_path / "landing" / "stations" / "a.csv",
        "id,name,elevation",
        ["1,Oslo,23.5", "2,Bergen,12.0", "3,Tromsø,100.25"],
        mtime=NOW - 60,
    )
    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path / "warehouse"
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "fork.branches": "2",
        "writer.output.format.0": "PARQUET",
        "data.publisher.final.dir.0": str(tmp_path / "lake"),
        "writer.output.format.1": "ICEBERG",
        "writer.iceberg.catalog.uri.1": uri,
        "writer.iceberg.warehouse.1": str(warehouse),
        "writer.iceberg.namespace.1": "geo",
    }
    marks: dict[str, str] = {}
    job = spec(tmp_path, props, execution_id=41)
    job["previous_watermarks"] = {}
    states = run_job(spark, job)
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    plan = publish(job, states, marks)
    assert [s["type"] for s in plan["stations"]] == ["fs_rename", "iceberg_commit", "high_watermark"]
    lake = pq.read_table(tmp_path / "lake" / "stations").sort_by("id").to_pylist()
    table = load_catalog(uri, None, str(warehouse)).load_table(("geo", "stations"))
    assert (
        table.scan().to_arrow().sort_by("id").to_pylist()
        == lake
        == [
            {"id": 1, "name": "Oslo", "elevation": 23.5},
            {"id": 2, "name": "Bergen", "elevation": 12.0},
            {"id": 3, "name": "Tromsø", "elevation": 100.25},
        ]
    )
    assert table.current_snapshot().summary.additional_properties["flowport.branch"] == "1"


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_datasets_committing_to_one_table_at_once_all_land(
    kind: str, spark: SparkSession, pg_catalog_uri: str, tmp_path: Path
) -> None:
    """Two datasets of a job into one table, committed by two threads at the same moment (as the
    worker's per-dataset pool does), the table created by neither yet: one creates it, Iceberg refuses
    the later commit until it read the table again, the step retries, and both land once."""
    for dataset in ("north", "south"):
        rows = [f"{i},{dataset}-{i}" for i in range(1, 201)]
        write_csv(tmp_path / "landing" / dataset / "a.csv", "id,name", rows, mtime=NOW - 60)
    uri, warehouse = _catalog_uri(kind, tmp_path, pg_catalog_uri), tmp_path / "warehouse"
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "writer.output.format": "ICEBERG",
        "writer.iceberg.catalog.uri": uri,
        "writer.iceberg.warehouse": str(warehouse),
        "writer.iceberg.namespace": "together",
        "writer.iceberg.table": f"regions_{kind}",
    }
    job = spec(tmp_path, props, execution_id=51)
    states = run_job(spark, job)
    assert [s["status"] for s in states] == ["SUCCEEDED", "SUCCEEDED"]
    plan = plan_commit(job, states)
    start = threading.Barrier(2)

    def commit(urn: str) -> int:
        start.wait()
        return CommitSequence.from_dicts([plan[urn][0]], props, urn).run()

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(commit, ["north", "south"])) == [1, 1]
    table = load_catalog(uri, None, str(warehouse)).load_table(("together", f"regions_{kind}"))
    names = sorted(table.scan().to_arrow().column("name").to_pylist())
    assert names == sorted([f"north-{i}" for i in range(1, 201)] + [f"south-{i}" for i in range(1, 201)])


def test_a_merge_on_a_composite_key_keeps_the_latest_version_of_each_key(tmp_path: Path) -> None:
    """Task output written by hand (no Spark): two versions of one key in a run, the later by the
    order column wins; a key of two columns matches only on both."""
    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", str(tmp_path / "warehouse")

    def run(execution: int, rows: list[tuple[str, int, float, int]]) -> None:
        out = tmp_path / "work" / str(execution) / f"task_job_{execution}_0" / "branch_0"
        out.mkdir(parents=True)
        table = pa.table(
            {
                "station": [r[0] for r in rows],
                "day": pa.array([r[1] for r in rows], pa.int32()),
                "rain": [r[2] for r in rows],
                "version": pa.array([r[3] for r in rows], pa.int64()),
            }
        )
        pq.write_table(table, out / "part-0.parquet")
        step = {
            "type": "iceberg_commit",
            "dataset_urn": "rain",
            "branch": 0,
            "catalog_uri": uri,
            "warehouse": warehouse,
            "namespace": "weather",
            "table": "rain",
            "mode": "merge",
            "merge_keys": ["station", "day"],
            "merge_order": "version",
            "execution_id": execution,
            "job_name": "job",
            "flow": "tests/pipeline",
            "files": [{"src": str(out / "part-0.parquet"), "relative": "part-0.parquet"}],
            "rows": len(rows),
            "watermark": str(max(r[3] for r in rows)),
        }
        assert CommitSequence.from_dicts([step], {}, "rain").run() == 1
        assert CommitSequence.from_dicts([step], {}, "rain").run() == 0

    run(1, [("oslo", 1, 0.5, 1), ("oslo", 2, 1.5, 1), ("bergen", 1, 9.0, 1)])
    run(2, [("oslo", 2, 2.5, 3), ("oslo", 2, 2.0, 2), ("bergen", 2, 7.0, 2)])
    table = load_catalog(uri, None, warehouse).load_table(("weather", "rain"))
    rows = table.scan().to_arrow().sort_by([("station", "ascending"), ("day", "ascending")]).to_pylist()
    assert [(r["station"], r["day"], r["rain"], r["version"]) for r in rows] == [
        ("bergen", 1, 9.0, 1),
        ("bergen", 2, 7.0, 2),
        ("oslo", 1, 0.5, 1),
        ("oslo", 2, 2.5, 3),
    ]
    assert committed_watermarks(
        {
            "writer.output.format": "ICEBERG",
            "writer.iceberg.catalog.uri": uri,
            "writer.iceberg.warehouse": warehouse,
            "writer.iceberg.namespace": "weather",
        },
        "job",
        "tests/pipeline",
    ) == {"rain": (2, "3")}
