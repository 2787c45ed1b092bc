"""The machine's database servers as the pipeline stories reach them: PostgreSQL for source
tables (a database of its own, named after the suite's) and MariaDB through its own client
(root, no password, as on the test machine)."""

from __future__ import annotations

import os
import subprocess
from urllib.parse import urlsplit

PG_HOST = os.environ.get("PIPELINE_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("PIPELINE_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("PIPELINE_TEST_PG_USER", "postgres")
# Named after the suite's own database, so suites on different DATABASE_URL names (as the README
# asks of ad-hoc runs beside `make test`) do not drop each other's source database.
SUITE_DB = urlsplit(os.environ.get("DATABASE_URL", "")).path.strip("/") or "flowport"
PG_DB = os.environ.get("PIPELINE_TEST_PG_DB") or f"{SUITE_DB}_pipeline_source"

MYSQL_HOST = os.environ.get("PIPELINE_TEST_MYSQL_HOST", "127.0.0.1")
MYSQL_PORT = int(os.environ.get("PIPELINE_TEST_MYSQL_PORT", "3306"))


def mysql(sql: str, database: str = "") -> str:
    """Run SQL with the MariaDB client (root, no password, as on the test machine); fails loudly."""
    argv = ["mysql", "-h", MYSQL_HOST, "-P", str(MYSQL_PORT), "-uroot", "-N", "-B", "-e", sql]
    done = subprocess.run([*argv, database] if database else argv, capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise AssertionError(
            f"MariaDB at {MYSQL_HOST}:{MYSQL_PORT} refused {sql[:80]!r}: {done.stderr.strip()}"
        )
    return done.stdout
