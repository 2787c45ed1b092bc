"""Shared fixtures: ONE real SparkSession (local[2]) for the whole suite and a real PostgreSQL database.

Nothing is mocked.  A test needing PostgreSQL fails (not skips) when it is down.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from portal.pipeline.spark.session import get_or_create_spark
from tests.builders.servers import MYSQL_HOST, MYSQL_PORT, PG_DB, PG_HOST, PG_PORT, PG_USER, SUITE_DB, mysql

# py4j logs "closing connection" from __del__ after pytest closed its streams; keep it quiet.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_or_create_spark(
        "local[2]", "flowport-pipeline-tests", {"spark.ui.enabled": "false", "spark.driver.memory": "2g"}
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def pg_database() -> dict[str, Any]:
    """(Re)create the test database once per session; fails loudly if PostgreSQL is unreachable."""
    with psycopg.connect(
        host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{PG_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{PG_DB}"')
    return {
        "url": f"jdbc:postgresql://{PG_HOST}:{PG_PORT}/{PG_DB}",
        "user": PG_USER,
        "conninfo": {"host": PG_HOST, "port": PG_PORT, "user": PG_USER, "dbname": PG_DB},
    }


@pytest.fixture
def pg(pg_database: dict[str, Any]) -> Iterator[psycopg.Connection]:
    """An autocommit connection to the test database."""
    with psycopg.connect(**pg_database["conninfo"], autocommit=True) as conn:
        yield conn


MYSQL_DB = f"{SUITE_DB}_pipeline_mysql"


@pytest.fixture(scope="session")
def mysql_database() -> dict[str, Any]:
    """A fresh MariaDB database for the session (the real server; no skip when it is down)."""
    mysql(f"DROP DATABASE IF EXISTS `{MYSQL_DB}`; CREATE DATABASE `{MYSQL_DB}`")
    return {"url": f"jdbc:mariadb://{MYSQL_HOST}:{MYSQL_PORT}/{MYSQL_DB}", "user": "root", "db": MYSQL_DB}
