"""Dates and time stamps before the Gregorian reform arrive as they left (issue #48). JDBC drivers
build ``java.sql`` dates, whose calendar is the Julian one before 1582-10-15: the ten days it skips
(1582-10-05 to 14) arrived ten days on, read or written. Here each reader (Spark's JDBC reader and
the Arrow path, from PostgreSQL and MariaDB) and each JDBC writer (PostgreSQL, MariaDB) carries them,
as the servers' proleptic Gregorian calendar and Spark's have them; a value Spark has no date for
fails the read naming its column."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq
import pymysql
import pytest
from pyspark.sql import types as T

from tests.builders.props import into_parquet, into_table, whole_table
from tests.builders.servers import MYSQL_HOST, MYSQL_PORT
from tests.unit.pipeline.helpers import data_files, run_and_publish, spec

WANT = [
    (1, dt.date(1582, 10, 10), dt.datetime(1582, 10, 5, 12, 0, 0, 500000), dt.datetime(1582, 10, 14, 23, 0)),
    (2, dt.date(1000, 1, 1), dt.datetime(1000, 1, 1), dt.datetime(1000, 1, 1)),
    (3, dt.date(1582, 10, 15), dt.datetime(1582, 10, 4, 23, 59, 59, 999999), dt.datetime(1582, 10, 15)),
]
PG_ROWS = (
    "(1, '1582-10-10', '1582-10-05 12:00:00.5', '1582-10-14 23:00:00+00'),"
    " (2, '1000-01-01', '1000-01-01 00:00:00', '1000-01-01 00:00:00+00'),"
    " (3, '1582-10-15', '1582-10-04 23:59:59.999999', '1582-10-15 00:00:00+00')"
)


def mariadb(db: str, statement: str) -> list[tuple[Any, ...]]:
    conn = pymysql.connect(host=MYSQL_HOST, port=MYSQL_PORT, user="root", password="", database=db)
    with conn, conn.cursor() as cur:
        cur.execute(statement)
        rows = list(cur.fetchall())
        conn.commit()
        return rows


def naive(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """An instant as its UTC wall time, so every destination's answer compares alike."""
    return tuple(
        v.astimezone(dt.UTC).replace(tzinfo=None) if isinstance(v, dt.datetime) and v.tzinfo else v
        for v in row
    )


def destination(
    kind: str, table: str, tmp_path: Path, pg_database: dict[str, Any], mysql_database: dict[str, Any]
) -> dict[str, str]:
    if kind == "parquet":
        return into_parquet(tmp_path / "out")
    if kind == "postgresql":
        return into_table(pg_database["url"], pg_database["user"], table)
    return into_table(mysql_database["url"], "root", table)


def read_back(kind: str, table: str, source: str, tmp_path: Path, pg: Any, mysql_database: dict[str, Any]):
    if kind == "parquet":
        copy = pa.concat_tables([pq.read_table(p) for p in data_files(tmp_path / "out" / source)])
        return sorted(naive(tuple(r.values())) for r in copy.select(["id", "d", "ts", "tstz"]).to_pylist())
    if kind == "postgresql":
        return [naive(r) for r in pg.execute(f"SELECT id, d, ts, tstz FROM {table} ORDER BY id").fetchall()]  # noqa: S608
    select = f"SELECT id, d, ts, tstz FROM {table} ORDER BY id"  # noqa: S608
    return [naive(r) for r in mariadb(mysql_database["db"], select)]


@pytest.mark.parametrize("arrow", ["true", "false"])
@pytest.mark.parametrize("kind", ["parquet", "postgresql", "mariadb"])
def test_the_days_the_julian_calendar_skips_arrive_from_postgresql(
    spark, pg, pg_database, mysql_database, tmp_path: Path, kind: str, arrow: str
):
    source = f"gap_{uuid.uuid4().hex[:6]}"
    pg.execute(f"CREATE TABLE {source} (id int PRIMARY KEY, d date, ts timestamp, tstz timestamptz)")
    pg.execute(f"INSERT INTO {source} VALUES {PG_ROWS}")  # noqa: S608
    props = {
        **whole_table(pg_database["url"], pg_database["user"], source, **{"source.jdbc.arrow": arrow}),
        **destination(kind, f"{source}_copy", tmp_path, pg_database, mysql_database),
    }
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert [s.get("error") for s in states] == [None], states

    assert read_back(kind, f"{source}_copy", source, tmp_path, pg, mysql_database) == WANT


@pytest.mark.parametrize("kind", ["parquet", "postgresql"])
def test_the_days_the_julian_calendar_skips_arrive_from_mariadb(
    spark, pg, pg_database, mysql_database, tmp_path: Path, kind: str
):
    source, db = f"gapm_{uuid.uuid4().hex[:6]}", mysql_database["db"]
    mariadb(db, f"CREATE TABLE {source} (id int PRIMARY KEY, d date, ts datetime(6), tstz datetime(6))")
    rows = ", ".join(f"({i}, '{d}', '{ts}', '{tstz}')" for i, d, ts, tstz in WANT)
    mariadb(db, f"INSERT INTO {source} VALUES {rows}")  # noqa: S608
    props = {
        **whole_table(mysql_database["url"], "root", source),
        **destination(kind, f"{source}_copy", tmp_path, pg_database, mysql_database),
    }
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert [s.get("error") for s in states] == [None], states

    assert read_back(kind, f"{source}_copy", source, tmp_path, pg, mysql_database) == WANT


@pytest.mark.parametrize("kind", ["parquet", "postgresql"])
def test_arrays_of_dates_and_time_stamps_arrive_from_postgresql(
    spark, pg, pg_database, mysql_database, tmp_path: Path, kind: str
):
    source = f"gap_arr_{uuid.uuid4().hex[:6]}"
    pg.execute(f"CREATE TABLE {source} (id int PRIMARY KEY, ds date[], ts timestamp[], tstz timestamptz[])")
    pg.execute(
        f"INSERT INTO {source} VALUES (1, '{{1582-10-10,NULL,1000-01-01}}', '{{\"1582-10-05 12:00:00.5\"}}',"  # noqa: S608
        " '{\"1582-10-14 23:00:00+00\"}'), (2, '{}', NULL, '{}')"
    )
    props = {
        **whole_table(pg_database["url"], pg_database["user"], source),
        **destination(kind, f"{source}_copy", tmp_path, pg_database, mysql_database),
    }
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert [s.get("error") for s in states] == [None], states

    if kind == "parquet":
        copy = pa.concat_tables([pq.read_table(p) for p in data_files(tmp_path / "out" / source)])
        got = sorted((r["id"], r["ds"], r["ts"], r["tstz"]) for r in copy.to_pylist())
    else:
        got = pg.execute(f"SELECT id, ds, ts, tstz FROM {source}_copy ORDER BY id").fetchall()  # noqa: S608
        typed = f"SELECT pg_typeof(ds)::text, pg_typeof(tstz)::text FROM {source}_copy LIMIT 1"  # noqa: S608
        kinds = pg.execute(typed).fetchone()
        assert kinds == ("date[]", "timestamp with time zone[]")
    [(_, days, walls, instants), empty] = got
    assert days == [dt.date(1582, 10, 10), None, dt.date(1000, 1, 1)]
    assert walls == [dt.datetime(1582, 10, 5, 12, 0, 0, 500000)]
    assert [i.astimezone(dt.UTC).replace(tzinfo=None) for i in instants] == [dt.datetime(1582, 10, 14, 23)]
    assert empty == (2, [], None, [])  # an empty array is not NULL


@pytest.mark.parametrize("arrow", ["true", "false"])
@pytest.mark.parametrize(("value", "shown"), [("infinity", "infinity"), ("0001-12-31 BC", "0001-12-31 BC")])
def test_a_date_spark_has_none_for_fails_the_read_naming_its_column(
    spark, pg, pg_database, tmp_path: Path, arrow: str, value: str, shown: str
):
    """Spark's dates run from 0001-01-01: an ``infinity`` or a date before the common era would
    arrive as a wrapped number (Arrow) or without its era (Spark's reading drops ``BC``)."""
    source = f"gap_bc_{uuid.uuid4().hex[:6]}"
    pg.execute(f"CREATE TABLE {source} (id int PRIMARY KEY, born date)")
    pg.execute(f"INSERT INTO {source} VALUES (1, '2000-01-01'), (2, %s)", (value,))  # noqa: S608
    props = {
        **whole_table(pg_database["url"], pg_database["user"], source, **{"source.jdbc.arrow": arrow}),
        **into_parquet(tmp_path / "out"),
    }
    states = run_and_publish(spark, spec(tmp_path, props), {})

    [error] = [s.get("error") for s in states]
    if arrow == "true" and value != "infinity":
        shown = "0000-12-31"  # the Arrow reader's proleptic year 0 is 1 BC
    assert f"column 'born' holds '{shown}', which Spark's date cannot hold" in str(error)
    assert not (tmp_path / "out" / source).exists()


def test_a_dataset_recorded_with_sparks_instants_keeps_them_in_the_servers_calendar(
    spark, pg, pg_database, tmp_path: Path
):
    """An earlier release recorded a wall-time ``timestamp`` as an instant (Spark's own mapping, the
    wall time in the JVM's zone): the dataset keeps that type, its values no longer moved by the
    driver's Julian calendar."""
    source = f"gap_rec_{uuid.uuid4().hex[:6]}"
    pg.execute(f"CREATE TABLE {source} (id int PRIMARY KEY, ts timestamp)")
    pg.execute(f"INSERT INTO {source} VALUES (1, '1582-10-05 12:00:00'), (2, '2024-06-01 08:00:00')")  # noqa: S608
    recorded = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("ts", T.TimestampType())])
    props = {
        **whole_table(pg_database["url"], pg_database["user"], source, **{"source.jdbc.arrow": "false"}),
        **into_parquet(tmp_path / "out"),
    }
    job = spec(tmp_path, props, previous_schemas={source: recorded.json()})
    states = run_and_publish(spark, job, {})
    assert [s.get("error") for s in states] == [None], states

    copy = pa.concat_tables([pq.read_table(p) for p in data_files(tmp_path / "out" / source)])
    assert copy.schema.field("ts").type == pa.timestamp("us", tz="UTC")  # the recorded instant
    zone = ZoneInfo(spark.sparkContext._jvm.java.util.TimeZone.getDefault().getID())
    wall = [dt.datetime(1582, 10, 5, 12), dt.datetime(2024, 6, 1, 8)]
    assert sorted(r["ts"] for r in copy.to_pylist()) == [
        w.replace(tzinfo=zone).astimezone(dt.UTC) for w in wall
    ]


def test_arrays_of_time_stamps_reach_mariadb_as_json_with_every_microsecond(
    spark, pg, pg_database, mysql_database, tmp_path: Path
):
    """MariaDB has no array type: an array is its JSON text, whose time stamps keep their
    microseconds (Spark's JSON would stop at milliseconds)."""
    source = f"gap_json_{uuid.uuid4().hex[:6]}"
    pg.execute(f"CREATE TABLE {source} (id int PRIMARY KEY, ds date[], ts timestamp[], tstz timestamptz[])")
    arrays = ("{1582-10-10,NULL}", '{"1582-10-05 12:00:00.000001"}', '{"2038-01-19 03:14:08.000001+00"}')
    pg.execute(f"INSERT INTO {source} VALUES (1, %s, %s, %s)", arrays)  # noqa: S608
    props = {
        **whole_table(pg_database["url"], pg_database["user"], source),
        **destination("mariadb", f"{source}_copy", tmp_path, pg_database, mysql_database),
    }
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert [s.get("error") for s in states] == [None], states

    [row] = mariadb(mysql_database["db"], f"SELECT ds, ts, tstz FROM {source}_copy")  # noqa: S608
    assert row == (
        '["1582-10-10",null]',
        '["1582-10-05T12:00:00.000001"]',
        '["2038-01-19T03:14:08.000001Z"]',
    )
