"""A throw-away PostgreSQL database for a benchmark that drives the portal through Django: made,
migrated and set as the portal's database, then dropped however the benchmark ends."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def throwaway_database() -> Iterator[str]:
    """Yields the database's name once Django is set up on it (BENCH_DATABASE_ADMIN_URL names the
    server's maintenance database, default postgres on 127.0.0.1:5432)."""
    admin_url = os.environ.get("BENCH_DATABASE_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    db_name = f"flowport_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db_name}"')
    try:
        sys.path.insert(0, str(ROOT))
        os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{db_name}"
        os.environ["LOG_LEVEL"] = "WARNING"
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        yield db_name
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{db_name}" WITH (FORCE)')
