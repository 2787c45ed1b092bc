"""PostgreSQL's text copied into a PostgreSQL staging table (portal.pipeline.destinations.directcopy)
stages what Spark's JDBC writer stages from the same text: the same column types and the same
values, every kind of value included; a value its column cannot take fails the copy by name and
leaves nothing staged; a cdc flow into PostgreSQL takes this road."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from portal.pipeline.cdc import pg as cdc_pg
from portal.pipeline.destinations import directcopy
from portal.pipeline.destinations.base import WriterContext
from portal.pipeline.destinations.jdbc import JdbcDataWriter
from portal.pipeline.errors import PipelineError
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.properties import Properties
from portal.pipeline.sources.base import TextScan
from portal.pipeline.sources.cdc import spark_type, staged_column
from tests.unit.pipeline.helpers import spec

KINDS = (
    "id int PRIMARY KEY, small int2, big int8, n numeric(20,6), wide numeric, f4 float4, f8 float8,"
    " ok boolean, day date, at timestamptz, at_local timestamp, note text, raw bytea, doc jsonb, tags text[]"
)
ROWS = [
    "(1, -32768, 9223372036854775807, -12345678901234.123456, 1e-30, 1.5, 'NaN', true, '2026-03-04',"
    " '2026-03-04 05:06:07.123456+02', '2026-03-04 05:06:07.654321', E'a, \"q\" ''s''\\nline\\ttab \\\\ Zoë 🎉',"
    " '\\x00ff10', '{\"a\": [1, \"b,c\"]}', ARRAY['x', 'y,z', NULL])",
    "(2, NULL, NULL, NULL, 123456.5, '-Infinity', 'Infinity', false, NULL, NULL, NULL, '', NULL, NULL, '{}')",
    "(3, 0, 0, 0, -0.000001, 0, -0.0, NULL, '1970-01-01', '1970-01-01 00:00:00+00', '1999-12-31 23:59:59',"
    " 'NULL', '\\x', 'null', NULL)",
]


def _staged_text(pg: psycopg.Connection, tmp_path: Path, table: str) -> tuple[str, list[tuple[str, Any]]]:
    """The table's rows as the cdc source stages them (text, in a Parquet file); the file and the
    Spark type each column is cast to."""
    columns = cdc_pg.columns(pg, table)
    names = [c[0] for c in columns]
    with pg.transaction():
        pg.execute("SET LOCAL TimeZone = 'UTC'")  # as the cdc source's connection reads
        rows = [r for batch in cdc_pg.read_text_rows(pg, table, names) for r in batch]
    path = str(tmp_path / f"{table}.parquet")
    pq.write_table(
        pa.table({n: pa.array([r[i] for r in rows], pa.string()) for i, n in enumerate(names)}), path
    )
    return path, [(n, spark_type(oid, mod)) for n, oid, mod, _key, _sql in columns]


def _writer(spark: SparkSession, tmp_path: Path, db: dict[str, Any], task: str) -> JdbcDataWriter:
    props = Properties(
        {"writer.jdbc.url": db["url"], "writer.jdbc.username": db["user"], "writer.jdbc.table": "kinds_copy"}
    )
    jobspec = JobSpec.from_dict(spec(tmp_path, {}))
    ctx = WriterContext(
        spark, jobspec, task, "kinds", 0, "main", str(tmp_path / "work"), dt.datetime.now(dt.UTC)
    )
    return JdbcDataWriter(props, ctx)


def _types(pg: psycopg.Connection, table: str) -> list[tuple[Any, ...]]:
    return pg.execute(
        "SELECT column_name, data_type, numeric_precision, numeric_scale, is_nullable"
        " FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
        (table,),
    ).fetchall()


def test_copied_text_stages_what_sparks_writer_stages(spark, pg, pg_database, tmp_path):
    pg.execute("DROP TABLE IF EXISTS kinds")
    pg.execute(f"CREATE TABLE kinds ({KINDS})")
    pg.execute("INSERT INTO kinds VALUES " + ", ".join(ROWS))  # noqa: S608 - test data
    path, kinds = _staged_text(pg, tmp_path, "kinds")
    staged = spark.read.parquet(path)
    # As the cdc source extracts them, without the kept source types (Spark's writer knows none).
    df = staged.select(*[staged_column(n, t.simpleString(), staged.schema[n].dataType) for n, t in kinds])
    text = TextScan("postgresql", [path], df.columns, df.schema)

    through_spark = _writer(spark, tmp_path, pg_database, "task-spark")
    through_spark.write(df)
    copied = _writer(spark, tmp_path, pg_database, "task-copy")
    assert directcopy.eligible(text, df.schema, copied)
    result, records = directcopy.write(text, copied)

    a, b = through_spark.staging_table, copied.staging_table
    assert (result.staging_table, records) == (b, 3)
    assert [t[1:] for t in _types(pg, b)] == [t[1:] for t in _types(pg, a)]
    assert [t[1] for t in _types(pg, b)][9:11] == ["timestamp with time zone", "timestamp without time zone"]
    assert [t[1] for t in _types(pg, b)][12] == "bytea"
    for left, right in ((a, b), (b, a)):  # the same rows, value for value (NaN equals NaN here)
        assert pg.execute(f"SELECT * FROM {left} EXCEPT ALL SELECT * FROM {right}").fetchall() == []  # noqa: S608
    at, at_local, note = pg.execute(f"SELECT at, at_local, note FROM {b} WHERE id = 1").fetchone()  # noqa: S608
    assert at == dt.datetime(2026, 3, 4, 3, 6, 7, 123456, dt.UTC)  # the instant, not the wall time
    assert at_local == dt.datetime(2026, 3, 4, 5, 6, 7, 654321)  # without a zone: the wall time, as it left
    assert note.endswith("Zoë 🎉") and "\n" in note and "\\" in note
    assert pg.execute(f"SELECT note IS NULL, note = '' FROM {b} WHERE id = 2").fetchone() == (False, True)  # noqa: S608


def test_a_value_its_column_cannot_take_fails_the_copy_by_name_and_stages_nothing(
    spark, pg, pg_database, tmp_path
):
    pg.execute("DROP TABLE IF EXISTS too_wide")
    pg.execute("CREATE TABLE too_wide (id int, wide numeric)")
    pg.execute("INSERT INTO too_wide VALUES (1, 1.5), (2, 1e25)")  # more digits than decimal(38,18) holds
    path, kinds = _staged_text(pg, tmp_path, "too_wide")
    df = spark.read.parquet(path).select(*[F.col(n).cast(t).alias(n) for n, t in kinds])
    writer = _writer(spark, tmp_path, pg_database, "task-wide")
    with pytest.raises(PipelineError, match=r"staging the rows: numeric field overflow.*column wide"):
        directcopy.write(TextScan("postgresql", [path], df.columns, df.schema), writer)
    gone = pg.execute("SELECT to_regclass(%s)", (writer.staging_table,)).fetchone()
    assert gone == (None,)


def test_only_postgresqls_text_into_a_postgresql_writer_whose_schema_is_the_extracts(
    spark, pg_database, tmp_path
):
    writer = _writer(spark, tmp_path, pg_database, "task-only")
    df = spark.createDataFrame([(1, "a")], "id int, name string")
    text = TextScan("postgresql", ["unused.parquet"], df.columns, df.schema)
    assert directcopy.eligible(text, df.schema, writer)
    assert not directcopy.eligible(
        TextScan("mysql", text.paths, text.columns, text.schema), df.schema, writer
    )
    renamed = df.withColumnRenamed("name", "title").schema  # a schema rule changed the extract
    assert not directcopy.eligible(text, renamed, writer)
    binary = spark.createDataFrame([(1, b"a")], "id int, raw binary")  # a bytea's hex text
    assert directcopy.eligible(
        TextScan("postgresql", [], binary.columns, binary.schema), binary.schema, writer
    )
    interval = spark.createDataFrame([(1, [1])], "id int, spans array<int>")  # no text form here
    assert not directcopy.eligible(
        TextScan("postgresql", [], interval.columns, interval.schema), interval.schema, writer
    )
