"""One table, one schema, whoever reads it: JDBC timestamps land in Parquet as standard INT64
microseconds marked UTC-adjusted (not legacy INT96), so a non-Spark reader keeps the instant, and a
CSV drop of the same table infers its ids as bigint, as the database gives them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from tests.builders.pipeline import orders_props
from tests.unit.pipeline.helpers import NOW, data_files, run_and_publish, spec, write_csv


def test_jdbc_timestamps_reach_pyarrow_with_their_utc_marker(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    pg.execute("DROP TABLE IF EXISTS departures")
    pg.execute("CREATE TABLE departures (id bigint PRIMARY KEY, dep timestamptz)")
    pg.execute("INSERT INTO departures VALUES (1, '2013-03-01 05:00:00+00'), (2, '2013-03-01 07:30:00+02')")
    props = orders_props(pg_database, tmp_path, "departures", **{"extract.delta.fields": "dep"})
    assert run_and_publish(spark, spec(tmp_path, props), {})[0]["status"] == "SUCCEEDED"

    files = data_files(tmp_path / "lake" / "departures")
    table = pa.concat_tables([pq.read_table(f) for f in files])
    assert table.schema.field("dep").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("id").type == pa.int64()
    physical = pq.ParquetFile(files[0]).schema.column(1)
    assert physical.physical_type == "INT64"  # not INT96
    assert sorted(table.column("dep").to_pylist()) == [
        dt.datetime(2013, 3, 1, 5, 0, tzinfo=dt.UTC),
        dt.datetime(2013, 3, 1, 5, 30, tzinfo=dt.UTC),
    ]


def test_a_csv_drop_infers_its_integers_as_bigint(spark: SparkSession, tmp_path: Path) -> None:
    write_csv(
        tmp_path / "landing" / "departures" / "d.csv", "id,seats,gate", ["1,180,A1", "2,90,B2"], NOW - 60
    )
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "data.publisher.final.dir": str(tmp_path / "lake"),
    }
    assert run_and_publish(spark, spec(tmp_path, props), {})[0]["status"] == "SUCCEEDED"
    table = pq.read_table(data_files(tmp_path / "lake" / "departures")[0])
    assert (table.schema.field("id").type, table.schema.field("seats").type) == (pa.int64(), pa.int64())
    assert table.schema.field("gate").type == pa.string()
