"""A PostgreSQL table into Parquet files with the Arrow reader: the Python workers write the files
themselves (portal.pipeline.destinations.directwrite) where that gives what Spark's writer would give — same
rows, same types read back by Spark and by pyarrow — and leave nothing behind when a slice fails;
everywhere else the task keeps Spark's writer."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from portal.pipeline import watermarks
from portal.pipeline.destinations import directwrite
from portal.pipeline.destinations.base import WriterContext
from portal.pipeline.destinations.files import FileDataWriter
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.properties import Properties
from portal.pipeline.sources.base import ArrowScan
from tests.builders.pipeline import ROWS, TYPES
from tests.unit.pipeline.helpers import data_files, read, run_and_publish, spec


@pytest.fixture
def typed(pg: psycopg.Connection, pg_database: dict[str, Any]) -> dict[str, Any]:
    pg.execute("DROP TABLE IF EXISTS typed")
    pg.execute(f"CREATE TABLE typed ({TYPES})")
    pg.execute("INSERT INTO typed VALUES " + ", ".join(ROWS))  # noqa: S608 - test data
    pg.execute(
        "INSERT INTO typed (id, day, at_local) SELECT i, date '2024-01-01', NULL FROM generate_series(4, 2000) i"
    )
    return pg_database


def _props(db: dict[str, Any], root: Path, arrow: str, **extra: str) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
        "source.jdbc.url": db["url"],
        "source.conn.username": db["user"],
        "source.jdbc.tables": "typed",
        "extract.delta.fields": "id",
        "extract.primary.key.fields": "id",
        "source.jdbc.num.partitions": "3",
        "source.jdbc.arrow": arrow,
        "data.publisher.final.dir": str(root / "lake"),
        **extra,
    }


def test_the_workers_write_the_parquet_spark_would_write(
    spark: SparkSession, typed: dict[str, Any], tmp_path: Path
) -> None:
    published = {}
    for arrow in ("auto", "false"):  # the default, and Spark's JDBC reader and writer
        root = tmp_path / arrow
        marks: dict[str, str] = {}
        states = run_and_publish(spark, spec(root, _props(typed, root, arrow)), marks)
        assert states[0]["status"] == "SUCCEEDED" and states[0]["records_extracted"] == 2000
        assert states[0]["fork_feed"] == ("direct" if arrow == "auto" else None)
        assert states[0]["branches"][0]["records_written"] == 2000
        assert watermarks.value_of(marks["typed"]) == "2000"
        published[arrow] = read(spark, root / "lake" / "typed")
    direct, jdbc = published["auto"], published["false"]
    assert direct.schema == jdbc.schema  # Spark's own schema, kept in the footer
    assert sorted(direct.collect()) == sorted(jdbc.collect())

    files = data_files(tmp_path / "auto" / "lake" / "typed")
    assert len(files) == 3 and all(f.name.endswith(".snappy.parquet") for f in files)
    arrow_schema = pq.read_schema(files[0])
    assert arrow_schema.field("at_zone").type == pa.timestamp("us", tz="UTC")
    assert arrow_schema.field("at_local").type == pa.timestamp("us")  # a wall time, as in the table
    assert all(field.nullable for field in arrow_schema)
    column = pq.ParquetFile(files[0]).schema.column(arrow_schema.get_field_index("price"))
    assert column.physical_type == "INT64" and column.logical_type.type == "DECIMAL"  # as Spark writes it


def test_a_second_run_takes_only_the_new_rows(
    spark: SparkSession, typed: dict[str, Any], pg: psycopg.Connection, tmp_path: Path
) -> None:
    marks: dict[str, str] = {}
    props = _props(typed, tmp_path, "auto")
    run_and_publish(spark, spec(tmp_path, props), marks)
    pg.execute("INSERT INTO typed (id, name) SELECT i, 'late' FROM generate_series(2001, 2100) i")
    states = run_and_publish(spark, spec(tmp_path, props, execution_id=2), marks)
    assert states[0]["fork_feed"] == "direct" and states[0]["records_extracted"] == 100
    lake = read(spark, tmp_path / "lake" / "typed")
    assert lake.count() == 2100 and lake.select("id").distinct().count() == 2100
    assert len(data_files(tmp_path / "lake")) == 3 + 1  # the new rows are in one slice: one new file


def test_an_empty_snapshot_publishes_one_file_with_the_schema(
    spark: SparkSession, typed: dict[str, Any], pg: psycopg.Connection, tmp_path: Path
) -> None:
    marks: dict[str, str] = {}
    props = _props(typed, tmp_path, "auto", **{"extract.is.full": "true"})
    pg.execute("DELETE FROM typed")  # a snapshot of an emptied table
    states = run_and_publish(spark, spec(tmp_path, props), marks)
    assert states[0]["status"] == "SUCCEEDED" and states[0]["records_extracted"] == 0
    assert states[0]["fork_feed"] == "direct"
    files = data_files(tmp_path / "lake")
    assert len(files) == 1 and pq.read_metadata(files[0]).num_rows == 0
    assert "at_zone" in pq.read_schema(files[0]).names


def test_a_schema_drift_rule_still_decides_what_is_written(
    spark: SparkSession, typed: dict[str, Any], pg: psycopg.Connection, tmp_path: Path
) -> None:
    marks: dict[str, str] = {}
    props = _props(typed, tmp_path, "auto", **{"schema.evolution.policy": "discard_columns"})
    first = run_and_publish(spark, spec(tmp_path, props), marks)
    pg.execute("ALTER TABLE typed ADD COLUMN secret_note text")
    pg.execute("INSERT INTO typed (id, secret_note) VALUES (2001, 'not for the lake')")
    second = run_and_publish(
        spark,
        spec(tmp_path, props, execution_id=2, previous_schemas={"typed": first[0]["source_schema"]}),
        marks,
    )
    assert second[0]["status"] == "SUCCEEDED" and second[0]["records_extracted"] == 1
    assert second[0]["fork_feed"] is None  # the new column is dropped on the way: Spark's writer
    assert all("secret_note" not in pq.read_schema(f).names for f in data_files(tmp_path / "lake"))


@pytest.mark.parametrize(
    ("extra", "feed"),
    [
        ({"writer.output.format": "CSV"}, None),  # another format: Spark's writer
        ({"writer.partition.columns": "day"}, None),  # partition folders are a Spark write's
        ({"writer.codec": "lz4"}, None),  # a codec the two writers name differently
        ({"converter.classes": "AddIngestionTimeConverter"}, None),
        ({"extract.lookback": "10"}, None),  # a look-back filter drops delivered rows on the way
        (
            {
                "fork.branches": "2",
                "data.publisher.final.dir.0": "{lake}/a",
                "data.publisher.final.dir.1": "{lake}/b",
            },
            "one_pass",
        ),
    ],
)
def test_anything_but_one_plain_parquet_branch_keeps_sparks_writer(
    spark: SparkSession, typed: dict[str, Any], tmp_path: Path, extra: dict[str, str], feed: str | None
) -> None:
    extra = {k: v.replace("{lake}", str(tmp_path / "lake")) for k, v in extra.items()}
    props = _props(typed, tmp_path, "auto", **extra)
    if "fork.branches" in extra:  # each branch has its own
        del props["data.publisher.final.dir"]
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    assert states[0]["fork_feed"] == feed and states[0]["records_extracted"] == 2000


class _FailingReader:
    """Slice 1 fails after its first batch (a connection lost mid-read)."""

    def batches(self, numbers: Iterable[int]) -> Iterator[Any]:
        for number in numbers:
            yield pa.record_batch({"id": pa.array([number * 10 + 1, number * 10 + 2], pa.int64())})
            if number == 1:
                raise ConnectionError("server closed the connection unexpectedly")


def test_a_slice_failing_mid_write_leaves_nothing_to_publish(spark: SparkSession, tmp_path: Path) -> None:
    jobspec = JobSpec.from_dict(spec(tmp_path, {}))
    props = Properties({"data.publisher.final.dir": str(tmp_path / "lake")})
    ctx = WriterContext(
        spark, jobspec, "task-0", "numbers", 0, "main", str(tmp_path / "work"), dt.datetime.now(dt.UTC)
    )
    writer = FileDataWriter(props, ctx, "PARQUET")
    scan = ArrowScan(3, _FailingReader(), T.StructType([T.StructField("id", T.LongType())]))
    assert directwrite.eligible(spark, scan, scan.schema, writer)
    with pytest.raises(Exception, match="server closed the connection"):
        directwrite.write(spark, scan, writer)
    writer.abort()  # what the task does with a failed branch
    assert not data_files(tmp_path / "work")  # no attempt's file survives: nothing could be published


class _Numbers:
    """Each slice's rows: two ids (a reader as the Arrow PostgreSQL reader gives them)."""

    def batches(self, numbers: Iterable[int]) -> Iterator[Any]:
        for number in numbers:
            yield pa.record_batch({"id": pa.array([number * 10 + 1, number * 10 + 2], pa.int64())})


def test_a_staging_folder_given_as_a_uri_is_written_through_pyarrows_file_systems(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A cluster's staging folder is a URI (hdfs://, s3a://, …); file:// takes the same road here:
    the workers open it with pyarrow's file systems, the driver moves the files through Hadoop's."""
    jobspec = JobSpec.from_dict(spec(tmp_path, {}))
    props = Properties({"data.publisher.final.dir": str(tmp_path / "lake")})
    work = (tmp_path / "work").as_uri()
    ctx = WriterContext(spark, jobspec, "task-0", "numbers", 0, "main", work, dt.datetime.now(dt.UTC))
    writer = FileDataWriter(props, ctx, "PARQUET")
    scan = ArrowScan(3, _Numbers(), T.StructType([T.StructField("id", T.LongType())]))
    assert writer.staging_dir.startswith("file://")
    assert directwrite.eligible(spark, scan, scan.schema, writer)
    _, records = directwrite.write(spark, scan, writer)
    assert records == 6
    files = data_files(tmp_path / "work")
    assert len(files) == 3 and not list((tmp_path / "work").rglob(directwrite.ATTEMPTS))
    assert sorted(v for f in files for v in pq.read_table(f).column("id").to_pylist()) == [
        1,
        2,
        11,
        12,
        21,
        22,
    ]


@pytest.mark.parametrize(
    ("master", "staging", "reachable"),
    [
        ("local[2]", "/var/flowport/work/x", True),
        ("local[2]", "file:///var/flowport/work/x", True),
        ("local[2]", "hdfs://nn:8020/work/x", False),  # a local session's workers: this disk only
        ("spark://m:7077", "/shared/flowport/work/x", True),  # the path Spark's writer would use too
        ("spark://m:7077", "hdfs://nn:8020/work/x", True),
        ("spark://m:7077", "s3a://lake/work/x", True),
        ("spark://m:7077", "abfss://c@acct.dfs.core.windows.net/work", True),
        ("spark://m:7077", "wasb://c@acct.blob.core.windows.net/work", False),  # not a pyarrow store
    ],
)
def test_where_the_workers_can_write_the_staging_folder(master: str, staging: str, reachable: bool) -> None:
    assert directwrite.reachable(master, staging) is reachable
