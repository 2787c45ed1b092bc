"""Test connection and discovery: what a data node holds, asked from the
portal with a short timeout, before a flow depends on it (Airbyte's "test
the source" and its schema discovery).

Files: the node's root exists and is readable; discovery lists the data
files under it (at most `DISCOVERY_MAX_FILES`, never following a link out of
the root) with the columns of CSV headers, JSON lines and Parquet footers.
JDBC (PostgreSQL, MySQL/MariaDB and SQLite; other databases only from the workers): connect and list the schemas;
discovery lists the tables with their columns and types. A failure answers
with the driver's own message. The same rules as everywhere keep the
portal's own database and files out of reach (`reach.node_problems`), and
the views ask `access.may_use` first, so a user tests only nodes granted to
them. Credentials typed for a test are used for that test and never stored.
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs

import psycopg
import pymysql
from django.conf import settings

from portal.pipeline.confinement import contains
from portal.topology import reach
from portal.topology.models import DataNode

DISCOVERY_MAX_FILES = 200
DISCOVERY_MAX_ENTRIES = 20_000  # files and folders looked at under a files node's root
DISCOVERY_MAX_COLUMNS = 5000  # JDBC: columns read from the catalog, all tables together
DATA_SUFFIXES = {".csv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}
# Column types a watermark can be taken from (ordered, compared with < and >).
_WATERMARK_WORDS = ("int", "serial", "numeric", "decimal", "double", "float", "real", "date", "time", "long")


@dataclass
class ConnectionResult:
    ok: bool
    message: str
    schemas: list[str] = field(default_factory=list)


@dataclass
class Column:
    name: str
    type: str

    @property
    def watermark_suitable(self) -> bool:
        lowered = self.type.lower()
        return any(word in lowered for word in _WATERMARK_WORDS) and "interval" not in lowered


@dataclass
class Dataset:
    """A table (`schema.table`) or a data file (its path under the root)."""

    name: str
    columns: list[Column]
    note: str = ""

    @property
    def watermark_columns(self) -> list[Column]:
        return [column for column in self.columns if column.watermark_suitable]


@dataclass
class Discovery:
    ok: bool
    message: str
    datasets: list[Dataset] = field(default_factory=list)
    truncated: bool = False


def _timeout() -> int:
    return settings.TOPOLOGY_CONNECTION_TIMEOUT_SECONDS


def _refusal(node: DataNode) -> str | None:
    problems = reach.node_problems(node.kind, dict(node.properties or {}))
    if problems:
        return "Refused: " + "; ".join(f"{key}: {reason}" for key, reason in sorted(problems.items()))
    return None


def test_connection(node: DataNode, *, user: str = "", password: str = "") -> ConnectionResult:
    """Never raises: every failure is a result with the reason."""
    if (refused := _refusal(node)) is not None:
        return ConnectionResult(False, refused)
    if node.kind == DataNode.Kind.FILES:
        return _test_files(node)
    if node.kind == DataNode.Kind.JDBC:
        try:
            with _jdbc_connect(node, user, password) as database:
                schemas = database.schemas()
        except _Unsupported as error:
            return ConnectionResult(False, str(error))
        except Exception as error:  # the driver's own message, whatever the driver
            return ConnectionResult(False, f"{type(error).__name__}: {str(error).strip()}"[:1000])
        return ConnectionResult(True, f"Connected; {len(schemas)} schema(s).", schemas)
    if node.kind == DataNode.Kind.ICEBERG:
        try:
            namespaces = [".".join(n) for n in _iceberg_catalog(node, password).list_namespaces()]
        except Exception as error:  # SQLAlchemy's and the driver's own message
            return ConnectionResult(False, f"{type(error).__name__}: {str(error).strip()}"[:1000])
        return ConnectionResult(
            True, f"Connected to the Iceberg catalog; {len(namespaces)} namespace(s).", namespaces
        )
    return ConnectionResult(False, f"The portal cannot test a {node.get_kind_display()} node.")


def discover(node: DataNode, *, user: str = "", password: str = "") -> Discovery:
    if (refused := _refusal(node)) is not None:
        return Discovery(False, refused)
    if node.kind == DataNode.Kind.FILES:
        return _discover_files(node)
    if node.kind == DataNode.Kind.JDBC:
        try:
            with _jdbc_connect(node, user, password) as database:
                datasets, truncated = database.tables()
        except _Unsupported as error:
            return Discovery(False, str(error))
        except Exception as error:
            return Discovery(False, f"{type(error).__name__}: {str(error).strip()}"[:1000])
        return Discovery(True, f"{len(datasets)} table(s).", datasets, truncated)
    if node.kind == DataNode.Kind.ICEBERG:
        try:
            datasets = _iceberg_tables(node, password)
        except Exception as error:
            return Discovery(False, f"{type(error).__name__}: {str(error).strip()}"[:1000])
        return Discovery(True, f"{len(datasets)} Iceberg table(s).", datasets)
    return Discovery(False, f"The portal cannot discover a {node.get_kind_display()} node.")


# --- iceberg ----------------------------------------------------------------------------


def _iceberg_catalog(node: DataNode, password: str):
    """The node's SQL catalog, looked at only (its tables are not created), with the short timeout."""
    from portal.pipeline.iceberg import load_catalog  # pyiceberg and PySpark load only for an Iceberg node

    properties = node.properties or {}
    uri = reach.catalog_uri(properties.get("catalog.uri", ""))
    if uri.startswith("postgresql") and "connect_timeout" not in uri:
        uri += ("&" if "?" in uri else "?") + f"connect_timeout={_timeout()}"
    warehouse = reach.node_root(properties.get("warehouse", ""))
    return load_catalog(uri, password or None, warehouse, create=False)


def _iceberg_tables(node: DataNode, password: str) -> list[Dataset]:
    catalog = _iceberg_catalog(node, password)
    datasets = []
    for namespace in catalog.list_namespaces():
        for identifier in catalog.list_tables(namespace):
            schema = catalog.load_table(identifier).schema()
            columns = [Column(f.name, str(f.field_type)) for f in schema.fields]
            datasets.append(Dataset(".".join(identifier), columns))
            if len(datasets) >= DISCOVERY_MAX_FILES:
                return datasets
    return datasets


# --- files ------------------------------------------------------------------------------


def _files_root(node: DataNode) -> str | None:
    path = (node.properties or {}).get("path", "")
    return reach.node_root(path) if path else None


def _test_files(node: DataNode) -> ConnectionResult:
    root = _files_root(node)
    if root is None:
        return ConnectionResult(False, "The node has no path.")
    if "://" in root:
        return ConnectionResult(
            False, f"{root}: the portal checks local paths only; the workers read this one."
        )
    try:
        entries = len(os.listdir(root))
    except OSError as error:
        return ConnectionResult(False, f"{root}: {error.strerror or error}")
    if not os.access(root, os.R_OK | os.X_OK):
        return ConnectionResult(False, f"{root}: not readable by the portal")
    return ConnectionResult(True, f"{root} exists and is readable ({entries} entries).")


def _discover_files(node: DataNode) -> Discovery:
    checked = _test_files(node)
    if not checked.ok:
        return Discovery(False, checked.message)
    root = os.path.realpath(_files_root(node) or "")
    datasets: list[Dataset] = []
    truncated = False
    visited = 0
    for folder, dirs, files in os.walk(root):  # os.walk does not follow links into folders
        dirs.sort()
        visited += len(files) + len(dirs)
        if visited > DISCOVERY_MAX_ENTRIES:  # a huge tree: answer in seconds with what was seen
            truncated = True
            break
        for name in sorted(files):
            path = os.path.join(folder, name)
            kind = DATA_SUFFIXES.get(Path(name).suffix.lower())
            if kind is None or not contains(root, os.path.realpath(path)):
                continue  # not data, or a link out of the root
            if len(datasets) >= DISCOVERY_MAX_FILES:
                truncated = True
                break
            datasets.append(_file_dataset(path, os.path.relpath(path, root), kind))
        if truncated:
            break
    return Discovery(True, f"{len(datasets)} data file(s) under {root}.", datasets, truncated)


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double"
    if isinstance(value, (dict, list)):
        return "struct" if isinstance(value, dict) else "array"
    return "string"


def _file_dataset(path: str, name: str, kind: str) -> Dataset:
    try:
        if kind == "csv":
            with open(path, newline="", encoding="utf-8", errors="replace") as handle:
                header = next(csv.reader(handle), [])
            return Dataset(name, [Column(column, "string") for column in header], "CSV header")
        if kind == "json":
            with open(path, encoding="utf-8", errors="replace") as handle:
                first = json.loads(handle.readline(1 << 20) or "{}")  # a first line of at most 1 MiB
            if not isinstance(first, dict):
                return Dataset(name, [], "not JSON lines of objects")
            return Dataset(
                name, [Column(key, _json_type(value)) for key, value in first.items()], "first line"
            )
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
        return Dataset(name, [Column(item.name, str(item.type)) for item in schema], "Parquet footer")
    except Exception as error:
        return Dataset(name, [], f"unreadable: {type(error).__name__}: {error}"[:300])


# --- JDBC -------------------------------------------------------------------------------


class _Unsupported(Exception):
    pass


def _credentials(url: str, user: str, password: str) -> tuple[str, str]:
    """Typed for the test, else the URL's own `user`/`password` parameters."""
    query = parse_qs(url.partition("?")[2].replace(";", "&"))
    return user or (query.get("user") or [""])[0], password or (query.get("password") or [""])[0]


class _Catalog:
    """One open connection and the two questions asked of it."""

    def __init__(self, connection, schemas_sql: str, columns_sql: str, params: tuple = ()) -> None:
        self.connection, self.schemas_sql, self.columns_sql, self.params = (
            connection,
            schemas_sql,
            columns_sql,
            params,
        )

    def __enter__(self) -> _Catalog:
        return self

    def __exit__(self, *exc) -> None:
        self.connection.close()

    def _rows(self, sql: str, params: tuple = ()) -> list[tuple]:
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
        truncated = len(rows) > DISCOVERY_MAX_COLUMNS
        tables: dict[str, Dataset] = {}
        for table, column, data_type in rows[:DISCOVERY_MAX_COLUMNS]:
            tables.setdefault(table, Dataset(table, [])).columns.append(Column(column, data_type))
        return list(tables.values()), truncated


class _SqliteCatalog(_Catalog):
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
        for name in names[:DISCOVERY_MAX_FILES]:
            columns = self._rows("SELECT name, type FROM pragma_table_info(?)", (name,))
            datasets.append(Dataset(name, [Column(column, kind or "any") for column, kind in columns]))
        return datasets, len(names) > DISCOVERY_MAX_FILES


_PG_COLUMNS = """
SELECT table_schema || '.' || table_name, column_name, data_type
FROM information_schema.columns
WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_schema NOT LIKE 'pg_toast%%'
ORDER BY table_schema, table_name, ordinal_position
LIMIT 5001
"""


# MySQL/MariaDB: the server's own schemas are not the node's data.
_MY_SCHEMAS = (
    "SELECT schema_name FROM information_schema.schemata "
    "WHERE schema_name NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys') ORDER BY 1"
)
_MY_COLUMNS = """
SELECT CONCAT(table_schema, '.', table_name), column_name, column_type
FROM information_schema.columns
WHERE table_schema NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')
ORDER BY table_schema, table_name, ordinal_position
LIMIT 5001
"""


def _jdbc_connect(node: DataNode, user: str, password: str) -> _Catalog:
    url = (node.properties or {}).get("url", "")
    target = reach._jdbc_target(url) if url else None
    if target is None:
        raise _Unsupported(
            f"'{url}' is not a JDBC URL the portal can test (jdbc:postgresql://host:port/db …)."
        )
    sub, hosts, database = target
    user, password = _credentials(url, user, password)
    if sub == "sqlite":
        path = database.split("?")[0]
        sqlite = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=_timeout())
        sqlite.execute("SELECT 1 FROM sqlite_master LIMIT 1")  # a missing or foreign file fails here
        return _SqliteCatalog(sqlite, "", "")
    host, port = hosts[0]
    if sub == "postgresql":
        connection = psycopg.connect(
            host=host,
            port=port,
            dbname=database,
            user=user or None,
            password=password or None,
            connect_timeout=_timeout(),
            autocommit=True,
        )
        return _Catalog(
            connection,
            "SELECT schema_name FROM information_schema.schemata "
            "WHERE schema_name NOT IN ('pg_catalog', 'information_schema') "
            "AND schema_name NOT LIKE 'pg_toast%%' AND schema_name NOT LIKE 'pg_temp%%' ORDER BY 1",
            _PG_COLUMNS,
        )
    if sub in ("mysql", "mariadb"):
        connection = pymysql.connect(
            host=host,
            port=port or 3306,
            database=database or None,
            user=user or None,
            password=password or "",
            connect_timeout=_timeout(),
            read_timeout=_timeout(),
        )
        return _Catalog(connection, _MY_SCHEMAS, _MY_COLUMNS)
    raise _Unsupported(
        f"The portal cannot test jdbc:{sub} URLs (PostgreSQL, MySQL/MariaDB and SQLite only; "
        "the workers still can)."
    )
