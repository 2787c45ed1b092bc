"""Stopping a killed job where it is: its Spark jobs, and the statements it sent to its source.

Cancelling a Spark job group interrupts the group's task threads, but a thread blocked on a
database socket — a JDBC read of a slow view that computes everything before its first row, or a
planning query the driver sends over psycopg — hears no interrupt: the statement runs on the server
until it ends by itself, and the job with it. So every statement a job sends to a source database
carries the job's tag in a comment (:func:`tagged`), and a kill also asks the server to cancel the
statements of the same login that carry it (:func:`cancel_statements`). Neither needs a privilege:
PostgreSQL lets a role cancel its own backends (``pg_cancel_backend``), MariaDB lets a user see and
``KILL QUERY`` its own threads.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from portal.pipeline import landing

log = logging.getLogger(__name__)

TAG_PREFIX = "flowport-job"

# The backends of this login whose statement carries the tag (never the asking one).
_PG_CANCEL = (
    "SELECT count(*) FILTER (WHERE pg_cancel_backend(pid)) FROM pg_stat_activity "
    "WHERE usename = current_user AND pid <> pg_backend_pid() AND strpos(query, ?) > 0"
)
_MYSQL_THREADS = (
    "SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() "
    "AND USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1) AND INSTR(INFO, ?) > 0"
)


def statement_tag(job_name: str, execution_id: int | None) -> str:
    """The tag of one job's statements: its name and execution, safe inside a SQL comment."""
    text = re.sub(r"[^A-Za-z0-9_.:-]", "_", f"{job_name}:{execution_id or 0}")
    return f"{TAG_PREFIX}:{text}"


def tagged(select: str, tag: str) -> str:
    """``select`` (a statement starting with SELECT) carrying ``tag`` in a comment the server keeps
    in its list of running statements."""
    head, _, rest = select.partition("SELECT")
    return f"{head}SELECT /* {tag} */{rest}"


def cancel_statements(spark: Any, options: Mapping[str, str], dialect: str, tag: str) -> int:
    """Cancel the running statements of the login ``options`` open that carry ``tag``, on a JDBC
    connection opened as Spark opens its own; how many were cancelled (0 for a database that has no
    server to ask, as SQLite)."""
    if dialect not in ("postgresql", "mysql"):
        return 0
    connection = landing.open_jdbc(spark, options)
    try:
        if dialect == "postgresql":
            statement = connection.prepareStatement(_PG_CANCEL)
            statement.setString(1, tag)
            rows = statement.executeQuery()
            return int(rows.getLong(1)) if rows.next() else 0
        statement = connection.prepareStatement(_MYSQL_THREADS)
        statement.setString(1, tag)
        rows = statement.executeQuery()
        threads = []
        while rows.next():
            threads.append(int(rows.getLong(1)))
        cancelled = 0
        for thread in threads:
            try:
                connection.createStatement().execute(f"KILL QUERY {thread}")
                cancelled += 1
            except Exception:  # the statement ended meanwhile: nothing left to stop
                log.debug("thread %s had ended", thread)
        return cancelled
    finally:
        connection.close()
