"""Where a connection landed decides, not the URL's text: each spelling that once walked around the
text check lands in a database of the real PostgreSQL server, and the pipeline's connections (Spark's
JDBC reader and writer, planning's psycopg, the Arrow reader's ADBC, the publish step's psycopg, an
Iceberg catalog's SQLAlchemy) are refused there when it is "the portal's own". A MariaDB node reaches
only the database it landed in. The portal's database stands here as the suite's PostgreSQL test
database, registered as the worker registers the real one."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adbc_driver_postgresql.dbapi as adbc
import psycopg
import pymysql
import pytest
from pyspark.sql import SparkSession

from portal.pipeline import landing, pgconn, run_job
from portal.pipeline.destinations import iceberg
from portal.pipeline.destinations.jdbc_targets import JdbcTarget
from tests.builders.servers import MYSQL_HOST, MYSQL_PORT, PG_HOST, PG_PORT, PG_USER, mysql

from .helpers import NOW, spec, write_csv

PG_DRIVER = "org.postgresql.Driver"
REFUSED = "the connection landed in the portal's own database"


@pytest.fixture
def portal(pg_database: dict[str, Any]) -> Iterator[landing.Landing]:
    """The suite's PostgreSQL database stands for the portal's own, registered for this process."""
    with psycopg.connect(**pg_database["conninfo"]) as conn:
        own = landing.identify(conn)
    landing.register([own])
    yield own
    landing.register([])


def _spellings(db: str) -> list[str]:
    escaped = db.replace("_", "%5F")
    return [
        f"jdbc:postgresql://0.0.0.0:{PG_PORT}/{db}",
        f"jdbc:postgresql://[::ffff:127.0.0.1]:{PG_PORT}/{db}",
        f"jdbc:postgresql://{PG_HOST}:{PG_PORT}/{escaped}",
        f"jdbc:postgresql://{PG_HOST}:{PG_PORT}/postgres?PGDBNAME={db}",
        f"jdbc:postgresql://203.0.113.9:1/elsewhere?host={PG_HOST}&port={PG_PORT}&dbname={db}",
        f"jdbc:postgresql:{db}?PGPORT={PG_PORT}",
    ]


def test_every_spelling_of_the_portals_database_is_refused_on_the_connection_it_opens(
    spark: SparkSession, pg_database: dict[str, Any], portal: landing.Landing
) -> None:
    db = pg_database["conninfo"]["dbname"]
    for url in _spellings(db):
        options = {"url": url, "driver": PG_DRIVER, "user": PG_USER}
        with pytest.raises(landing.LandingRefused, match=f"data node 'x': {REFUSED}"):
            landing.check_jdbc(spark, options, "data node 'x'")
        # The portal's own reading of the URL (Test connection, the publish step) lands there too.
        with pytest.raises(landing.LandingRefused, match=REFUSED):
            pgconn.connect(url, PG_USER, None)


def test_pgjdbc_and_the_portal_read_a_url_alike_so_both_land_in_one_database(
    spark: SparkSession, pg_database: dict[str, Any]
) -> None:
    db = pg_database["conninfo"]["dbname"]
    for url in [*_spellings(db), f"jdbc:postgresql://{PG_HOST}:{PG_PORT}/"]:
        by_jdbc = landing.check_jdbc(
            spark, {"url": url, "driver": PG_DRIVER, "user": PG_USER}, "x", portal=[]
        )
        with pgconn.connect(url, PG_USER, None) as conn:
            by_psycopg = landing.check(conn, "x", portal=[])
        assert by_psycopg == by_jdbc, url
    assert pgconn.parse_url(f"jdbc:postgresql://{PG_HOST}:{PG_PORT}/").database is None  # the user's name


def test_another_database_of_the_same_server_is_not_the_portals(
    spark: SparkSession, portal: landing.Landing
) -> None:
    url = f"jdbc:postgresql://{PG_HOST}:{PG_PORT}/postgres"
    found = landing.check_jdbc(spark, {"url": url, "driver": PG_DRIVER, "user": PG_USER}, "x")
    assert found.database == "postgres" and found.servers & portal.servers
    assert not found.same_database(portal)


def test_one_database_is_one_landing_whichever_driver_asks(
    spark: SparkSession, pg_database: dict[str, Any]
) -> None:
    info = pg_database["conninfo"]
    with psycopg.connect(**info) as conn:
        by_psycopg = landing.identify(conn)
    uri = f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{info['dbname']}"
    with adbc.connect(uri) as conn:
        by_adbc = landing.identify(conn, landing.POSTGRESQL)
    jdbc = landing.open_jdbc(spark, {"url": pg_database["url"], "driver": PG_DRIVER, "user": PG_USER})
    try:
        by_jdbc = landing.identify_jdbc(jdbc)
    finally:
        jdbc.close()
    assert by_psycopg == by_adbc == by_jdbc
    assert by_psycopg.database == info["dbname"] and any(
        s.startswith("pg-start:") for s in by_psycopg.servers
    )


def _orders_table(pg: psycopg.Connection) -> None:
    pg.execute("DROP TABLE IF EXISTS landing_orders")
    pg.execute("CREATE TABLE landing_orders (id bigint PRIMARY KEY, amount numeric(10,2))")
    pg.execute("INSERT INTO landing_orders VALUES (1, 9.5), (2, 3.25)")


def test_a_jdbc_source_over_the_portals_database_reads_nothing(
    spark: SparkSession,
    pg: psycopg.Connection,
    pg_database: dict[str, Any],
    portal: landing.Landing,
    tmp_path: Path,
) -> None:
    _orders_table(pg)
    db = pg_database["conninfo"]["dbname"]
    props = {
        "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
        "source.jdbc.url": f"jdbc:postgresql://0.0.0.0:{PG_PORT}/{db}",
        "source.conn.username": PG_USER,
        "source.jdbc.tables": "landing_orders",
        "extract.is.full": "true",
        "data.publisher.final.dir": str(tmp_path / "out"),
    }
    states = run_job(spark, spec(tmp_path, props, data_nodes={"source": "sneaky"}))
    assert [s["status"] for s in states] == ["FAILED"]
    assert f"data node 'sneaky': {REFUSED}" in states[0]["error"]
    assert states[0]["records_extracted"] == 0 and not (tmp_path / "work" / "task-output").exists()


def test_the_planning_and_arrow_connections_are_judged_as_they_open(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    """The JVM's connection lands elsewhere (a database of the server that is not the portal's); the
    planning query's psycopg and the Arrow reader's ADBC connections are judged on their own."""
    from portal.pipeline.sources.arrow_pg import _SliceReader

    _orders_table(pg)
    info = pg_database["conninfo"]
    with psycopg.connect(**info) as conn:
        own = landing.identify(conn)
    uri = f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{info['dbname']}"
    reader = _SliceReader(["SELECT 1"], uri, '{"type":"struct","fields":[]}', "UTC", (own,), "data node 'n'")
    with pytest.raises(landing.LandingRefused, match=f"data node 'n': {REFUSED}"):
        list(reader.batches([0]))
    with psycopg.connect(uri) as conn, pytest.raises(landing.LandingRefused, match=REFUSED):
        landing.check(conn, "data node 'n'", portal=[own])


def test_a_jdbc_writer_into_the_portals_database_writes_nothing(
    spark: SparkSession,
    pg: psycopg.Connection,
    pg_database: dict[str, Any],
    portal: landing.Landing,
    tmp_path: Path,
) -> None:
    pg.execute("DROP TABLE IF EXISTS stolen_rows")
    tables = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    before = sorted(pg.execute(tables).fetchall())
    write_csv(tmp_path / "landing" / "orders" / "a.csv", "id,name", ["1,a"], mtime=NOW - 60)
    db = pg_database["conninfo"]["dbname"]
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "writer.output.format": "JDBC",
        "writer.jdbc.url": f"jdbc:postgresql://{PG_HOST}:{PG_PORT}/postgres?PGDBNAME={db}",
        "writer.jdbc.username": PG_USER,
        "writer.jdbc.table": "stolen_rows",
    }
    states = run_job(spark, spec(tmp_path, props, data_nodes={"destination": "sink"}))
    assert [s["status"] for s in states] == ["FAILED"]
    assert f"data node 'sink': {REFUSED}" in states[0]["error"]
    assert states[0]["records_extracted"] == 0
    assert sorted(pg.execute(tables).fetchall()) == before  # no target, no staging table


def test_an_iceberg_catalog_in_the_portals_database_creates_nothing_there(
    pg: psycopg.Connection, pg_database: dict[str, Any], portal: landing.Landing, tmp_path: Path
) -> None:
    pg.execute("DROP TABLE IF EXISTS iceberg_tables, iceberg_namespace_properties")
    db = pg_database["conninfo"]["dbname"]
    uri = f"postgresql+psycopg://{PG_USER}@0.0.0.0:{PG_PORT}/{db}"
    with pytest.raises(landing.LandingRefused, match=f"writer.iceberg.catalog.uri: {REFUSED}"):
        iceberg.load_catalog(uri, None, str(tmp_path / "warehouse"))
    assert pg.execute("SELECT to_regclass('iceberg_tables')").fetchone() == (None,)
    elsewhere = f"postgresql+psycopg://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres"
    catalog = iceberg.load_catalog(elsewhere, None, str(tmp_path / "warehouse"), create=False)
    catalog.engine.dispose()  # another database of the server: judged, and let through


def test_a_sqlite_file_is_the_portals_under_any_name(tmp_path: Path) -> None:
    own_file = tmp_path / "portal.sqlite3"
    sqlite3.connect(own_file).close()
    own = landing.Landing(landing.SQLITE, "main", landing.file_marks(str(own_file)))
    (tmp_path / "alias").mkdir()
    os.link(own_file, tmp_path / "alias" / "data.db")  # a hard link: another path, the same file
    (tmp_path / "link.db").symlink_to(own_file)
    for path in (own_file, tmp_path / "alias" / "data.db", tmp_path / "link.db"):
        target = JdbcTarget(f"jdbc:sqlite:{path}", None, None)
        with pytest.raises(landing.LandingRefused, match=REFUSED):
            landing.register([own])
            try:
                with target.connect():
                    pass
            finally:
                landing.register([])
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        assert not landing.check(conn, "x", portal=[own]).same_database(own)


# --- MariaDB: a node's reach is the database it landed in --------------------------------------


@pytest.fixture
def two_mariadb_databases() -> Iterator[tuple[str, str]]:
    """The node's database and another team's, with a secret, on the machine's MariaDB."""
    mine, other = f"fp_land_mine_{os.getpid()}", f"fp_land_other_{os.getpid()}"
    statements = [
        f"DROP DATABASE IF EXISTS `{mine}`; CREATE DATABASE `{mine}`",
        f"DROP DATABASE IF EXISTS `{other}`; CREATE DATABASE `{other}`",
        f"CREATE TABLE `{mine}`.orders (id BIGINT PRIMARY KEY, placed DATETIME)",
        f"INSERT INTO `{mine}`.orders VALUES (1, '2026-01-01 00:00:00')",  # noqa: S608 - our own names
        f"CREATE TABLE `{other}`.secrets (id BIGINT PRIMARY KEY, token TEXT)",
        f"INSERT INTO `{other}`.secrets VALUES (1, 'hunter2')",  # noqa: S608 - our own names
    ]
    mysql("; ".join(statements))
    yield mine, other
    mysql(f"DROP DATABASE IF EXISTS `{mine}`; DROP DATABASE IF EXISTS `{other}`")


def _mariadb_source(tmp_path: Path, mine: str, tables: str, **extra: str) -> dict[str, Any]:
    props = {
        "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
        "source.jdbc.url": f"jdbc:mariadb://{MYSQL_HOST}:{MYSQL_PORT}/{mine}",
        "source.conn.username": "root",
        "source.jdbc.tables": tables,
        "extract.is.full": "true",
        "data.publisher.final.dir": str(tmp_path / "out"),
        "writer.output.format": "CSV",
        **extra,
    }
    return spec(tmp_path, props, data_nodes={"source": "shop"})


def test_a_mariadb_source_reads_no_other_database_of_its_server(
    spark: SparkSession, two_mariadb_databases: tuple[str, str], tmp_path: Path
) -> None:
    mine, other = two_mariadb_databases
    for tables in (f"{other}.secrets", "*.*", f"{mine}.orders, `{other}`.secrets", "fp_land_other%.secrets"):
        states = run_job(spark, _mariadb_source(tmp_path, mine, tables))
        assert [s["status"] for s in states] == ["FAILED"], tables
        assert "a MySQL/MariaDB node reaches only its own database" in states[0]["error"]
        assert states[0]["records_extracted"] == 0
    excluded = _mariadb_source(tmp_path, mine, "orders", **{"source.jdbc.tables.exclude": f"{other}.*"})
    assert "source.jdbc.tables.exclude" in run_job(spark, excluded)[0]["error"]
    # Its own tables, qualified or by pattern, are read, and a pattern matches only its own database.
    states = run_job(spark, _mariadb_source(tmp_path, mine, f"{mine}.*"))
    assert [(s["dataset_urn"], s["status"], s["records_extracted"]) for s in states] == [
        (f"{mine}.orders", "SUCCEEDED", 1)
    ]


def test_a_mariadb_node_without_a_database_reaches_none(
    spark: SparkSession, two_mariadb_databases: tuple[str, str]
) -> None:
    url = f"jdbc:mysql://{MYSQL_HOST}:{MYSQL_PORT}/"
    found = landing.check_jdbc(spark, {"url": url, "driver": "org.mariadb.jdbc.Driver", "user": "root"}, "x")
    assert found.engine == landing.MYSQL and found.database == ""
    with pytest.raises(landing.LandingRefused, match="landed in no database"):
        landing.own_database(found, {"source.jdbc.tables": ["orders"]}, "data node 'shop'")


def test_a_mariadb_writer_creates_nothing_in_another_database(
    spark: SparkSession, two_mariadb_databases: tuple[str, str], tmp_path: Path
) -> None:
    mine, other = two_mariadb_databases
    write_csv(tmp_path / "landing" / "orders" / "a.csv", "id,name", ["1,a"], mtime=NOW - 60)
    for key, value in (
        ("writer.jdbc.table", f"{other}.stolen"),
        ("writer.jdbc.marker.table", f"{other}.marks"),
    ):
        props = {
            "source.class": "portal.pipeline.sources.files.FileSource",
            "source.files.path": str(tmp_path / "landing"),
            "source.files.format": "csv",
            "writer.output.format": "JDBC",
            "writer.jdbc.url": f"jdbc:mariadb://{MYSQL_HOST}:{MYSQL_PORT}/{mine}",
            "writer.jdbc.username": "root",
            "writer.jdbc.table": "orders_copy",
            key: value,
        }
        states = run_job(spark, spec(tmp_path, props, data_nodes={"destination": "shop"}))
        assert [s["status"] for s in states] == ["FAILED"] and key in states[0]["error"], states[0]["error"]
        assert "a MySQL/MariaDB node reaches only its own database" in states[0]["error"]
    assert mysql("SHOW TABLES", other).split() == ["secrets"]
    assert mysql("SHOW TABLES", mine).split() == ["orders"]  # no staging table either
    # The publish step on its own refuses the same, before any statement.
    target = JdbcTarget(f"jdbc:mariadb://{MYSQL_HOST}:{MYSQL_PORT}/{mine}", "root", None)
    with pytest.raises(landing.LandingRefused, match="reaches only its own database"):
        target.publish(f"{other}.marks", f"{other}.stolen", [], 0, (1, "job", "orders", 0))
    assert mysql("SHOW TABLES", other).split() == ["secrets"]


def test_the_save_finds_names_outside_a_mariadb_nodes_database_before_connecting() -> None:
    assert landing.url_database("jdbc:mariadb://db:3306/shop?user=u") == "shop"
    assert landing.url_database("jdbc:mysql://db:3306/") is None
    names = {
        "source.jdbc.tables": "orders, shop.items, hr.salaries, *.*",
        "source.jdbc.tables.exclude": "other%.x",
        "writer.jdbc.table.1": "hr.x",
        "writer.jdbc.table": "shop.{table}",
        "writer.jdbc.marker.table": "${marker}",
    }
    problems = landing.foreign_problems("shop", "data node 'shop'", names)
    assert [p.split(":")[0] for p in problems] == [
        "source.jdbc.tables",
        "source.jdbc.tables",
        "source.jdbc.tables.exclude",
        "writer.jdbc.table.1",
    ]
    assert "'hr.salaries' names another database than the one of data node 'shop' ('shop')" in problems[0]
    assert len(landing.foreign_problems(None, "data node 'x'", {"source.jdbc.tables": "shop.items"})) == 1


def test_pymysql_asks_mariadb_the_same_as_its_jdbc_driver(
    spark: SparkSession, two_mariadb_databases: tuple[str, str]
) -> None:
    mine, _ = two_mariadb_databases
    conn = pymysql.connect(host=MYSQL_HOST, port=MYSQL_PORT, user="root", database=mine)
    try:
        by_pymysql = landing.identify(conn)
    finally:
        conn.close()
    url = f"jdbc:mysql://{MYSQL_HOST}:{MYSQL_PORT}/{mine}"
    by_jdbc = landing.check_jdbc(
        spark, {"url": url, "driver": "org.mariadb.jdbc.Driver", "user": "root"}, "x"
    )
    assert by_pymysql == by_jdbc and by_jdbc.database == mine
