"""The PostgreSQL Arrow reader (COPY into Arrow batches inside Spark tasks) on a real PostgreSQL:
the same rows and types as Spark's JDBC reader — numerics and decimals, NULLs, timestamps with and
without a time zone, text forms of uuid/json — slices that take every key exactly once at the
boundaries, and the JDBC reader kept where the Arrow reader cannot read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import DataFrame, SparkSession

from portal.pipeline import landing, watermarks
from portal.pipeline.properties import Properties
from portal.pipeline.sources import arrow_pg
from tests.builders.pipeline import ROWS, TYPES
from tests.unit.pipeline.helpers import read, run_and_publish, spec


@pytest.fixture
def typed(pg: psycopg.Connection, pg_database: dict[str, Any]) -> dict[str, Any]:
    pg.execute("DROP TABLE IF EXISTS typed")
    pg.execute(f"CREATE TABLE typed ({TYPES})")
    pg.execute("INSERT INTO typed VALUES " + ", ".join(ROWS))  # noqa: S608 - test data
    return pg_database


def _jdbc(spark: SparkSession, db: dict[str, Any], query: str, **options: str) -> DataFrame:
    return (
        spark.read.format("jdbc")
        .options(url=db["url"], user=db["user"], driver="org.postgresql.Driver", dbtable=query, **options)
        .load()
    )


def _props(db: dict[str, Any], **extra: str) -> Properties:
    return Properties(
        {
            "source.jdbc.url": db["url"],
            "source.conn.username": db["user"],
            "source.jdbc.arrow": "true",
            **extra,
        }
    )


def _is_arrow(df: DataFrame) -> bool:
    return "MapInArrow" in df._jdf.queryExecution().analyzed().toString()


def test_every_type_reads_as_the_jdbc_reader_reads_it(spark: SparkSession, typed: dict[str, Any]) -> None:
    query = "(SELECT t.* FROM typed t) AS fp_wu"
    jdbc = _jdbc(spark, typed, query)
    arrow = arrow_pg.read_or_keep(jdbc, _props(typed), query, arrow_pg.Slices("id", 1, 4, 2))
    assert _is_arrow(arrow) and arrow.schema == jdbc.schema
    assert sorted(arrow.collect()) == sorted(jdbc.collect())
    row = {r.id: r for r in arrow.collect()}
    assert str(row[1].big) == "12345678901234567890123456789012.123456"
    assert str(row[2].ratio) == "-5.000000000000000001"  # half-up to numeric's scale 18, as JDBC
    assert row[1].at_zone.isoformat() == "2024-03-31T00:30:00"  # the instant, in UTC
    assert row[1].code == "ab " and row[2].code is None  # char(3) padded, as JDBC's getString
    assert row[1].doc == '{"k": [1, 2]}' and row[1].uid == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    assert all(v is None for k, v in row[3].asDict().items() if k != "id")


def test_a_judged_logins_arrow_connections_must_land_where_its_probe_did(
    spark: SparkSession, typed: dict[str, Any]
) -> None:
    """A user-made node's or a flow's own login was proved in one database: an Arrow task landing
    anywhere else reads nothing."""
    query = "(SELECT t.* FROM typed t) AS fp_wu"
    jdbc = _jdbc(spark, typed, query)
    with psycopg.connect(**typed["conninfo"]) as conn:
        here = landing.identify(conn)
    elsewhere = landing.Landing(here.engine, "another_database", here.servers)
    for proved, reads in ((here, True), (elsewhere, False)):
        scan = arrow_pg.scan_for(jdbc, _props(typed), query, None, portal=(), proved=proved)
        assert scan is not None
        if reads:
            assert scan.frame(spark).count() == 3
        else:
            with pytest.raises(Exception, match="not where its login was proved"):
                scan.frame(spark).count()


@pytest.mark.parametrize("count", [1, 2, 3, 7, 50])
def test_slices_take_every_key_once_null_and_outside_the_bounds_included(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], count: int
) -> None:
    pg.execute("DROP TABLE IF EXISTS sliced")
    pg.execute("CREATE TABLE sliced (k bigint, v int)")
    pg.execute("INSERT INTO sliced SELECT k, k FROM generate_series(-7, 9) k UNION ALL SELECT NULL, 100")
    query = "(SELECT t.* FROM sliced t) AS fp_wu"
    # Bounds narrower than the data (a row added after planning): the open-ended first/last slices take it.
    slices = arrow_pg.Slices("k", -5, 8, count)
    arrow = arrow_pg.read_or_keep(_jdbc(spark, pg_database, query), _props(pg_database), query, slices)
    assert _is_arrow(arrow) and arrow.rdd.getNumPartitions() == min(count, 13)
    assert sorted(r.v for r in arrow.collect()) == [*range(-7, 10), 100]


def test_the_jdbc_reader_stays_where_the_arrow_reader_cannot_read(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any]
) -> None:
    pg.execute("DROP TABLE IF EXISTS arrays")
    pg.execute("CREATE TABLE arrays (id int, tags text[])")
    query = "(SELECT t.* FROM arrays t) AS fp_wu"
    jdbc = _jdbc(spark, pg_database, query)
    assert arrow_pg.read_or_keep(jdbc, _props(pg_database), query, None) is jdbc  # an array column
    plain = "(SELECT id FROM arrays) AS fp_wu"
    jdbc = _jdbc(spark, pg_database, plain)
    assert _is_arrow(arrow_pg.read_or_keep(jdbc, _props(pg_database), plain, None))
    assert (
        arrow_pg.read_or_keep(jdbc, _props(pg_database, **{"source.jdbc.arrow": "false"}), plain, None)
        is jdbc
    )
    odd = _props(pg_database, **{"source.jdbc.url": pg_database["url"] + "?prepareThreshold=0"})
    assert arrow_pg.read_or_keep(jdbc, odd, plain, None) is jdbc  # a parameter libpq does not know


def test_libpq_uri_carries_credentials_encoded_and_known_parameters() -> None:
    uri = arrow_pg.libpq_uri("jdbc:postgresql://db.example:6543/sales?sslmode=require", "etl", "p@ss/w:rd")
    assert uri == "postgresql://etl:p%40ss%2Fw%3Ard@db.example:6543/sales?sslmode=require"
    assert (
        arrow_pg.libpq_uri("jdbc:postgresql://h/db?user=u&password=p", None, None) == "postgresql://u:p@h/db"
    )
    assert arrow_pg.libpq_uri("jdbc:mysql://h/db", "u", None) is None
    assert arrow_pg.libpq_uri("jdbc:postgresql://h1,h2/db", "u", None) is None


def test_a_watermark_run_reads_the_same_through_arrow_and_through_jdbc(
    spark: SparkSession, typed: dict[str, Any], pg: psycopg.Connection, tmp_path: Path
) -> None:
    outputs = {}
    for reader in ("true", "false"):
        root = tmp_path / reader
        props = {
            "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
            "source.jdbc.url": typed["url"],
            "source.conn.username": typed["user"],
            "source.jdbc.tables": "typed",
            "extract.delta.fields": "at_local",
            "extract.primary.key.fields": "id",
            "extract.lookback": "1h",
            "source.jdbc.num.partitions": "2",
            "source.jdbc.arrow": reader,
            "data.publisher.final.dir": str(root / "lake"),
        }
        marks: dict[str, str] = {}
        states = run_and_publish(spark, spec(root, props), marks)
        assert (
            states[0]["records_extracted"] == 2
            and watermarks.value_of(marks["typed"]) == "2024-03-31 02:30:00.123456"
        )
        outputs[reader] = sorted(read(spark, root / "lake" / "typed").collect())
    assert outputs["true"] == outputs["false"] and len(outputs["true"]) == 2
