"""Test connection and discovery of a JDBC node (PostgreSQL, MySQL/MariaDB and SQLite; other
databases only from the workers): connect and list the schemas; discovery lists the tables with
their columns, database types (with their modifiers: numeric(12,2)), primary keys (from the
catalog) and watermark candidates. Every connection is judged where it landed before the first
question (`portal.pipeline.landing`: never the portal's own database, a MySQL/MariaDB node only
in a database of its own); a failure answers with the driver's own message, within the timeout."""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg
import pymysql

from portal.pipeline import landing, pgconn
from portal.pipeline.discovery import shapes
from portal.pipeline.discovery.shapes import (
    Asking,
    Column,
    ConnectionResult,
    Dataset,
    Discovery,
    Probe,
    Unsupported,
    failure,
    mark_candidates,
)
from portal.pipeline.jdbcurls import jdbc_target


class Catalog:
    """One open connection and the two questions asked of it."""

    def __init__(
        self, connection: Any, schemas_sql: str, columns_sql: str, params: tuple[Any, ...] = ()
    ) -> None:
        self.connection, self.schemas_sql, self.columns_sql, self.params = (
            connection,
            schemas_sql,
            columns_sql,
            params,
        )

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.connection.close()

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        cursor = self.connection.cursor()
        try:
            cursor.execute(sql, params)
            return list(cursor.fetchall())
        finally:
            cursor.close()

    def schemas(self) -> list[str]:
        return [row[0] for row in self._rows(self.schemas_sql)]

    def tables(self) -> tuple[list[Dataset], bool]:
        rows = self._rows(self.columns_sql, self.params)
        truncated = len(rows) > shapes.DISCOVERY_MAX_COLUMNS
        tables: dict[str, Dataset] = {}
        for table, column, data_type, key_position, identity in rows[: shapes.DISCOVERY_MAX_COLUMNS]:
            found = Column(column, data_type, int(key_position or 0), bool(identity))
            tables.setdefault(table, Dataset(table, [])).columns.append(found)
        for dataset in tables.values():
            mark_candidates(dataset.columns)
        return list(tables.values()), truncated


class _SqliteCatalog(Catalog):
    def schemas(self) -> list[str]:
        return ["main"]

    def tables(self) -> tuple[list[Dataset], bool]:
        names = [
            row[0]
            for row in self._rows(
                "SELECT name FROM sqlite_master WHERE type IN ('table','view') ORDER BY name"
            )
        ]
        datasets = []
        for name in names[: shapes.DISCOVERY_MAX_FILES]:
            columns = self._rows("SELECT name, type, pk FROM pragma_table_info(?)", (name,))
            found = [Column(column, kind or "any", int(pk or 0)) for column, kind, pk in columns]
            datasets.append(Dataset(name, mark_candidates(found)))
        return datasets, len(names) > shapes.DISCOVERY_MAX_FILES


# Columns as the user sees them (information_schema shows only what they may read), with their
# place in the primary key (pg_constraint: one catalog join, no slow key_column_usage view) and
# whether the database numbers them (identity, serial's nextval default). The type as the server
# names it with its modifiers (format_type: numeric(12,2), varchar(40), integer[]), not the
# information schema's bare data_type.
_PG_COLUMNS = """
WITH keys AS (
  SELECT k.conrelid, a.attname, array_position(k.conkey, a.attnum) AS position
  FROM pg_catalog.pg_constraint k
  JOIN pg_catalog.pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = ANY (k.conkey)
  WHERE k.contype = 'p'
)
SELECT c.table_schema || '.' || c.table_name, c.column_name, pg_catalog.format_type(a.atttypid, a.atttypmod),
  keys.position, c.is_identity = 'YES' OR coalesce(c.column_default, '') LIKE 'nextval(%%'
FROM information_schema.columns c
JOIN pg_catalog.pg_attribute a ON a.attname = c.column_name
  AND a.attrelid = (quote_ident(c.table_schema) || '.' || quote_ident(c.table_name))::regclass
LEFT JOIN keys ON keys.attname = c.column_name AND keys.conrelid = a.attrelid
WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema') AND c.table_schema NOT LIKE 'pg_toast%%'
ORDER BY c.table_schema, c.table_name, c.ordinal_position
LIMIT 5001
"""


# MySQL/MariaDB: one connection reaches every database of the server; the node's is the one it
# landed in (DATABASE()), and only that one is shown.
_MY_SCHEMAS = "SELECT DATABASE()"
_MY_COLUMNS = """
SELECT CONCAT(c.table_schema, '.', c.table_name), c.column_name, c.column_type, k.seq_in_index,
  c.extra LIKE '%%auto_increment%%'
FROM information_schema.columns c
LEFT JOIN information_schema.statistics k ON k.index_name = 'PRIMARY'
  AND k.table_schema = c.table_schema AND k.table_name = c.table_name AND k.column_name = c.column_name
WHERE c.table_schema = DATABASE()
ORDER BY c.table_schema, c.table_name, c.ordinal_position
LIMIT 5001
"""


def _judged(asking: Asking, connection: Any) -> landing.Landing:
    """Where a connection landed, before any question of the test: never the portal's own database,
    and a MySQL/MariaDB connection in a database of its own (LandingRefused otherwise)."""
    try:
        found = landing.check(connection, asking.what, portal=asking.portal, bounds=asking.bounds)
        landing.own_database(found, {}, asking.what)
    except BaseException:
        connection.close()
        raise
    return found


def connect(asking: Asking) -> Catalog:
    """An open connection to the node's database as `asking` logs in, judged where it landed."""
    url = asking.properties.get("url", "")
    target = jdbc_target(url) if url else None
    user, password, timeout = asking.user, asking.password, asking.timeout
    if target is None:
        raise Unsupported(
            f"'{url}' is not a JDBC URL the portal can test (jdbc:postgresql://host:port/db …)."
        )
    sub, hosts, database = target
    if sub == "sqlite":
        path = (database or "").split("?")[0]
        sqlite = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout)
        _judged(asking, sqlite)
        sqlite.execute("SELECT 1 FROM sqlite_master LIMIT 1")  # a missing or foreign file fails here
        return _SqliteCatalog(sqlite, "", "")
    if sub == "postgresql":
        parsed = pgconn.parse_url(url)
        connection = psycopg.connect(
            host=",".join(host for host, _ in hosts),
            port=",".join(str(port) for _, port in hosts),
            dbname=database,
            user=user or None,
            password=password or None,
            service=parsed.service if parsed else None,
            connect_timeout=timeout,
            # a catalog question on a huge or locked schema also answers within the timeout
            options=f"-c statement_timeout={timeout * 1000} -c lock_timeout={timeout * 1000}",
            autocommit=True,
        )
        _judged(asking, connection)
        return Catalog(
            connection,
            "SELECT schema_name FROM information_schema.schemata "
            "WHERE schema_name NOT IN ('pg_catalog', 'information_schema') "
            "AND schema_name NOT LIKE 'pg_toast%%' AND schema_name NOT LIKE 'pg_temp%%' ORDER BY 1",
            _PG_COLUMNS,
        )
    if sub in ("mysql", "mariadb"):
        host, port = hosts[0]
        connection = pymysql.connect(
            host=host,
            port=port or 3306,
            database=database or None,
            user=user or None,
            password=password or "",
            connect_timeout=timeout,
            read_timeout=timeout,
            write_timeout=timeout,
        )
        _judged(asking, connection)
        return Catalog(connection, _MY_SCHEMAS, _MY_COLUMNS)
    raise Unsupported(
        f"The portal cannot test jdbc:{sub} URLs (PostgreSQL, MySQL/MariaDB and SQLite only; "
        "the workers still can)."
    )


def test(asking: Asking) -> ConnectionResult:
    try:
        with connect(asking) as database:
            schemas = database.schemas()
    except Exception as error:  # a refusal, or the driver's own message, whatever the driver
        return ConnectionResult(False, failure(error))
    return ConnectionResult(True, f"Connected; {len(schemas)} schema(s).", schemas)


def discover(asking: Asking) -> Discovery:
    try:
        with connect(asking) as database:
            datasets, truncated = database.tables()
    except Exception as error:
        return Discovery(False, failure(error))
    return Discovery(True, f"{len(datasets)} table(s).", datasets, truncated)


PROBE = Probe(test=test, discover=discover)
