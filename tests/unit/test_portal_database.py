"""The portal's own database is PostgreSQL or SQLite: an operator who points
DATABASE_URL at MariaDB learns it at start, before a half-migrated schema."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _settings_with(url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "portal.settings"}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_mariadb_portal_database_is_refused_at_start_naming_what_works():
    started = _settings_with("mysql://root@127.0.0.1:3306/flowport")

    assert started.returncode == 3  # gunicorn halts on a worker that exits 3 while booting
    assert started.stderr.startswith("Flowport cannot start: DATABASE_URL names a mysql database")
    assert "Traceback" not in started.stderr  # one plain message, not a traceback around it
    assert "must be PostgreSQL (postgres://…) or SQLite" in started.stderr
    assert "data nodes" in started.stderr


def test_postgresql_and_sqlite_start():
    for url in ("postgres://postgres@127.0.0.1:5432/flowport_never_opened", "sqlite:////tmp/never-opened.db"):
        started = _settings_with(url)
        assert started.returncode == 0, started.stderr
