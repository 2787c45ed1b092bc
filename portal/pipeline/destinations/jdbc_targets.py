"""Publishing into a MySQL/MariaDB or SQLite destination table, exactly once.

The ``jdbc_publish`` commit step (:mod:`portal.pipeline.destinations.jdbc`) moves a branch's staging
table(s) into the target table and records a publish marker keyed by (execution, job, dataset,
branch), so a second run of the step sees the marker and changes nothing. PostgreSQL does it in one
transaction through psycopg; this module does the same for the other dialects:

* SQLite (stdlib ``sqlite3``): DDL is transactional, so everything, the staging table's drop
  included, is one ``BEGIN IMMEDIATE`` transaction (which also serialises concurrent publishers).
* MySQL/MariaDB (PyMySQL): DDL commits implicitly, so the marker and target tables are created
  first, then the rows and the marker go in one InnoDB transaction under ``GET_LOCK``; the staging
  tables are dropped after the commit (a crash in between leaves them, and the step's ``verify``
  drops them once it sees the marker).

With merge keys (``writer.jdbc.write.mode=upsert`` on ``extract.primary.key.fields``) the rows are
upserted (:meth:`~portal.pipeline.dialects.Dialect.move_rows`) and a target created here gets a
unique index on the keys. The marker counts the rows staged. Under ``schema.evolution.policy=evolve``
the target first takes the staging table's new and wider columns (:mod:`portal.pipeline.destinations.jdbc_evolution`).

Every connection is judged as it opens (:mod:`portal.pipeline.landing`): never the portal's own
database, and on MySQL/MariaDB no table outside the database it landed in.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import parse_qs, urlparse

from portal.pipeline import landing, usernode
from portal.pipeline.destinations import jdbc_evolution, jdbc_modes
from portal.pipeline.dialects import MYSQL, SQLITE, Dialect, dialect_for
from portal.pipeline.errors import CommitConflictError

Key = tuple[int, str, str, int]


class JdbcTarget:
    """A DB-API connection to one destination database, in its dialect."""

    def __init__(
        self,
        url: str,
        user: str | None,
        password: str | None,
        *,
        what: str = "writer.jdbc.url",
        bounds: usernode.Bounds | None = None,
    ) -> None:
        self.url, self.user, self.password, self.what = url, user, password, what
        self.bounds = bounds  # a user-made node's (portal.pipeline.usernode)
        self.dialect: Dialect = dialect_for(url, "writer.jdbc.url")
        self.landing: landing.Landing | None = None

    @contextlib.contextmanager
    def connect(self) -> Iterator[Any]:
        if self.dialect is SQLITE:
            path = self.url[len("jdbc:sqlite:") :].split("?")[0]
            conn: Any = sqlite3.connect(path.removeprefix("file:"), isolation_level=None, timeout=30)
        else:
            import pymysql

            parsed = urlparse(self.url[len("jdbc:") :])
            params = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
            conn = pymysql.connect(
                host=parsed.hostname or "localhost",
                port=parsed.port or 3306,
                database=landing.url_database(self.url),  # as the driver reads it (not ";a=b")
                user=self.user or params.get("user") or "",
                password=self.password or params.get("password") or "",
                autocommit=True,
            )
        try:
            self.landing = landing.check(conn, self.what, bounds=self.bounds)
            yield conn
        finally:
            conn.close()

    def _own(self, *tables: str) -> None:
        """MySQL/MariaDB: every table named lies in the database the connection landed in."""
        if self.landing is not None:
            landing.own_database(self.landing, {"writer.jdbc.table": list(tables)}, self.what, self.bounds)

    def _sql(self, statement: str) -> str:
        """Statements are written with ``?`` placeholders; PyMySQL wants ``%s``."""
        return statement.replace("?", "%s") if self.dialect is MYSQL else statement

    def _run(self, conn: Any, statement: str, args: Sequence[Any] = ()) -> Any:
        cur = conn.cursor()
        cur.execute(self._sql(statement), tuple(args))
        return cur

    def identity(self, conn: Any, table: str) -> tuple[str, bool]:
        """``table`` as its database names it (MySQL/MariaDB: ``database.table``) and whether it exists."""
        if self.dialect is SQLITE:
            return table.strip('"'), self.exists(conn, table)
        schema, _, name = table.rpartition(".")
        if not schema:
            schema = str(self._run(conn, "SELECT DATABASE()", ()).fetchone()[0] or "")
        return f"{schema.strip('`')}.{name.strip('`')}", self.exists(conn, table)

    def exists(self, conn: Any, table: str) -> bool:
        self._own(table)
        if self.dialect is SQLITE:
            row = self._run(
                conn, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)
            ).fetchone()
        else:
            schema, _, name = table.rpartition(".")
            row = self._run(
                conn,
                "SELECT 1 FROM information_schema.tables WHERE table_schema=COALESCE(NULLIF(?, ''), DATABASE()) "
                "AND table_name=?",
                (schema, name),
            ).fetchone()
        return row is not None

    def marker(self, conn: Any, marker_table: str, key: Key) -> tuple[str, int] | None:
        if not self.exists(conn, marker_table):
            return None
        row = self._run(
            conn,
            f"SELECT target_table, rows_published FROM {self.dialect.quote(marker_table)} "  # noqa: S608
            "WHERE execution_id=? AND job_name=? AND dataset_urn=? AND branch=?",
            key,
        ).fetchone()
        return (row[0], int(row[1])) if row else None

    def create(self, table: str, columns: list[tuple[str, str]]) -> None:
        """(Re)create ``table`` with these (name, type) columns: SQLite's driver fails Spark's own
        "does the table exist?" probe, so the writer creates its staging table here and appends."""
        q = self.dialect.quote
        with self.connect() as conn:
            self._own(table)
            self.drop(conn, table)
            self._run(conn, f"CREATE TABLE {q(table)} ({', '.join(f'{q(n)} {t}' for n, t in columns)})")

    def tables_starting(self, conn: Any, prefix: str, schema: str = "") -> list[str]:
        """The names of the tables whose name begins with ``prefix`` (in ``schema``, else the
        connection's database)."""
        if self.dialect is SQLITE:
            rows = self._run(
                conn, "SELECT name FROM sqlite_master WHERE type='table' AND substr(name, 1, ?) = ?",
                (len(prefix), prefix),
            ).fetchall()  # fmt: skip
        else:
            rows = self._run(
                conn,
                "SELECT table_name FROM information_schema.tables WHERE "
                "table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND LEFT(table_name, ?) = ?",
                (schema, len(prefix), prefix),
            ).fetchall()
        return [str(row[0]) for row in rows]

    def drop(self, conn: Any, table: str) -> None:
        self._own(table)
        self._run(conn, f"DROP TABLE IF EXISTS {self.dialect.quote(table)}")

    def _evolve(self, conn: Any, target: str, staging_tables: list[str]) -> None:
        """``schema.evolution.policy=evolve``: the target takes the staging tables' new and wider columns."""
        if not self.exists(conn, target):
            return
        for staging in staging_tables:
            if self.exists(conn, staging):
                jdbc_evolution.evolve(self.dialect, lambda q, a: self._run(conn, q, a), target, staging)

    def _new_target(self, conn: Any, target: str, mode: str, keys: list[str]) -> None:
        """A target just created: a merge's unique index on the keys, a history's version columns."""
        if mode == "merge" and keys:
            self._run(conn, self.dialect.unique_index(target, keys))
        if mode == "history":
            for statement in jdbc_modes.history_columns(self.dialect, target):
                self._run(conn, statement)

    def _before(self, target: str, mode: str, replace_range: dict[str, Any] | None) -> list[str]:
        """Before the rows of an existing target: emptied (overwrite) or a backfill's range deleted."""
        if mode == "overwrite":
            return [jdbc_modes.clear(self.dialect, target)]
        if mode == "append" and replace_range:
            statement = jdbc_modes.range_delete(
                self.dialect,
                target,
                replace_range["column"],
                replace_range.get("low"),
                replace_range.get("high"),
            )
            return [statement] if statement else []
        return []

    def publish(  # noqa: C901, PLR0915
        self,
        marker_table: str,
        target: str,
        staging_tables: list[str],
        rows: int | None,
        key: Key,
        merge: tuple[list[str], str | None] = ([], None),
        evolve: bool = False,
        mode: str | None = None,
        delete_column: str | None = None,
        replace_range: dict[str, Any] | None = None,
    ) -> tuple[str, int] | None:
        """Move the staging rows and write the marker; returns an existing marker instead (done).
        ``mode`` is the write mode (:mod:`portal.pipeline.destinations.jdbc_modes`; default: merge with keys)."""
        q = self.dialect.quote
        text = "VARCHAR(255)" if self.dialect is MYSQL else "TEXT"
        with self.connect() as conn:
            self._own(marker_table, target, *staging_tables)
            self._run(
                conn,
                f"CREATE TABLE IF NOT EXISTS {q(marker_table)} (execution_id BIGINT NOT NULL, "
                f"job_name {text} NOT NULL, dataset_urn {text} NOT NULL, branch INT NOT NULL, "
                f"target_table {text} NOT NULL, rows_published BIGINT NOT NULL, "
                "published_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, "
                "PRIMARY KEY (execution_id, job_name, dataset_urn, branch))",
            )
            keys, order = merge
            mode = mode or ("merge" if keys else "append")
            created = self.exists(conn, target)
            if self.dialect is MYSQL:
                for staging in staging_tables[:1]:
                    if self.exists(conn, staging):
                        self._run(conn, f"CREATE TABLE IF NOT EXISTS {q(target)} LIKE {q(staging)}")
                if not created and self.exists(conn, target):
                    self._new_target(conn, target, mode, keys)
                if evolve:  # DDL commits at once in MySQL: before the rows' transaction
                    self._evolve(conn, target, staging_tables)
                self._run(conn, "SELECT GET_LOCK(?, 60)", (repr(key),))
                self._run(conn, "START TRANSACTION")
            else:
                self._run(conn, "BEGIN IMMEDIATE")
            try:
                done = self.marker(conn, marker_table, key)
                if done is not None:
                    self._run(conn, "ROLLBACK")
                    return done
                total = 0
                columns: list[str] = []
                for index, staging in enumerate(staging_tables):
                    if not self.exists(conn, staging):
                        raise CommitConflictError(
                            f"staging table {staging} is gone and no publish marker exists"
                        )
                    # Identifiers are quoted by the dialect; values go as parameters.
                    src, dst = q(staging), q(target)
                    if self.dialect is SQLITE and not self.exists(conn, target):
                        self._run(conn, f"CREATE TABLE {dst} AS SELECT * FROM {src} WHERE 0")  # noqa: S608
                        self._new_target(conn, target, mode, keys)
                    if evolve:
                        self._evolve(conn, target, [staging])
                    probe = f"SELECT * FROM {src} LIMIT 0"  # noqa: S608
                    columns = [c[0] for c in self._run(conn, probe).description]
                    total += int(self._run(conn, f"SELECT count(*) FROM {src}").fetchone()[0])  # noqa: S608
                    if index == 0 and created:
                        for statement in self._before(target, mode, replace_range):
                            self._run(conn, statement)
                    if mode != "history":
                        moved = keys if mode == "merge" else []
                        self._run(conn, self.dialect.move_rows(target, staging, columns, moved, order))
                if mode == "merge":
                    after = jdbc_modes.merge_deletes(
                        self.dialect, target, staging_tables, columns, keys, order, delete_column
                    )
                elif mode == "history":
                    now = dt.datetime.now(dt.UTC)
                    after = jdbc_modes.history(
                        self.dialect, target, staging_tables, columns, keys, order, delete_column, now
                    )
                else:
                    after = []
                for statement in after:
                    self._run(conn, statement)
                if self.dialect is SQLITE:
                    for staging in staging_tables:
                        self.drop(conn, staging)
                if rows is not None and total != int(rows):
                    raise CommitConflictError(
                        f"staging tables of {key[2]} hold {total} row(s), expected {rows}; not published"
                    )
                self._run(
                    conn,
                    f"INSERT INTO {q(marker_table)} (execution_id, job_name, dataset_urn, branch, target_table, "  # noqa: S608
                    "rows_published) VALUES (?, ?, ?, ?, ?, ?)",
                    (*key, target, total),
                )
                self._run(conn, "COMMIT")
            except BaseException:
                self._run(conn, "ROLLBACK")
                raise
            finally:
                if self.dialect is MYSQL:
                    self._run(conn, "SELECT RELEASE_LOCK(?)", (repr(key),))
            for staging in staging_tables:  # MySQL: after the commit (DDL would have committed)
                self.drop(conn, staging)
        return None
