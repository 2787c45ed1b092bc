"""Shared fixtures: ONE real SparkSession (local[2]) for the whole suite and a real PostgreSQL database.

Nothing is mocked.  A test needing PostgreSQL fails (not skips) when it is down.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from pyspark.sql import SparkSession

from portal.pipeline.session import get_or_create_spark

PG_HOST = os.environ.get("PIPELINE_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("PIPELINE_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("PIPELINE_TEST_PG_USER", "postgres")
# Named after the suite's own database, so suites on different DATABASE_URL names (as the README
# asks of ad-hoc runs beside `make test`) do not drop each other's source database.
_SUITE_DB = urlsplit(os.environ.get("DATABASE_URL", "")).path.strip("/") or "flowport"
PG_DB = os.environ.get("PIPELINE_TEST_PG_DB") or f"{_SUITE_DB}_pipeline_source"

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


MYSQL_HOST = os.environ.get("PIPELINE_TEST_MYSQL_HOST", "127.0.0.1")
MYSQL_PORT = int(os.environ.get("PIPELINE_TEST_MYSQL_PORT", "3306"))
MYSQL_DB = f"{_SUITE_DB}_pipeline_mysql"


def mysql(sql: str, database: str = "") -> str:
    """Run SQL with the MariaDB client (root, no password, as on the test machine); fails loudly."""
    argv = ["mysql", "-h", MYSQL_HOST, "-P", str(MYSQL_PORT), "-uroot", "-N", "-B", "-e", sql]
    done = subprocess.run([*argv, database] if database else argv, capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise AssertionError(
            f"MariaDB at {MYSQL_HOST}:{MYSQL_PORT} refused {sql[:80]!r}: {done.stderr.strip()}"
        )
    return done.stdout


@pytest.fixture(scope="session")
def mysql_database() -> dict[str, Any]:
    """A fresh MariaDB database for the session (the real server; no skip when it is down)."""
    mysql(f"DROP DATABASE IF EXISTS `{MYSQL_DB}`; CREATE DATABASE `{MYSQL_DB}`")
    return {"url": f"jdbc:mariadb://{MYSQL_HOST}:{MYSQL_PORT}/{MYSQL_DB}", "user": "root", "db": MYSQL_DB}
