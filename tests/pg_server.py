"""A PostgreSQL database of a story's own for data nodes: a source or destination the portal
connects to, whatever its own database is. On the portal's server when the suite runs on
PostgreSQL; in the SQLite pass on ``PIPELINE_TEST_PG_HOST``/``_PORT``/``_USER`` (default
``postgres@127.0.0.1:5432``), the server the pipeline tests use."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from django.db import connection


@dataclass(frozen=True)
class Scratch:
    host: str
    port: int
    user: str
    name: str

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.name}"

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(
            host=self.host, port=self.port, user=self.user, dbname=self.name, autocommit=True
        )


def _server() -> tuple[str, int, str, str]:
    """(host, port, user, a name the suite's databases start with)."""
    own = connection.settings_dict
    if connection.vendor == "postgresql":
        return own["HOST"] or "127.0.0.1", int(own["PORT"] or 5432), own["USER"] or "postgres", own["NAME"]
    return (
        os.environ.get("PIPELINE_TEST_PG_HOST", "127.0.0.1"),
        int(os.environ.get("PIPELINE_TEST_PG_PORT", "5432")),
        os.environ.get("PIPELINE_TEST_PG_USER", "postgres"),
        f"{Path(str(own['NAME'])).stem}_sqlite",  # never one of the PostgreSQL pass's names
    )


@contextlib.contextmanager
def scratch_database(suffix: str) -> Iterator[Scratch]:
    """An empty database ``<the suite's>_<suffix>``, dropped afterwards."""
    host, port, user, prefix = _server()
    found = Scratch(host, port, user, f"{prefix}_{suffix}"[:60])

    def admin() -> psycopg.Connection:
        return psycopg.connect(host=host, port=port, user=user, dbname="postgres", autocommit=True)

    with admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{found.name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{found.name}"')
    try:
        yield found
    finally:
        with admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{found.name}" WITH (FORCE)')
