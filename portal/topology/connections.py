"""Test connection and discovery: what a data node holds, asked from the
portal with a short timeout, before a flow depends on it (Airbyte's "test
the source" and its schema discovery).

Files: the node's root exists and is readable; discovery lists the data
files under it (at most `DISCOVERY_MAX_FILES`, never following a link out of
the root) with the columns of CSV headers, JSON lines and Parquet footers.
CSV and JSON-lines columns are typed from a bounded sample (the first
`SAMPLE_ROWS` rows, at most `SAMPLE_BYTES`) by Spark's own inference rules
(`inferSchema`, CSV integers widened to bigint as the files source does), so
the picker shows what a run will read; each file offers its modification
time as the watermark, as the files source uses it.
JDBC (PostgreSQL, MySQL/MariaDB and SQLite; other databases only from the workers): connect and list the schemas;
discovery lists the tables with their columns, database types, primary keys
(from the catalog) and watermark candidates (identity/serial/auto-increment
columns, a single integer primary key, timestamps and dates). A failure
answers with the driver's own message, within the connect timeout. The same rules as everywhere keep the
portal's own database and files out of reach: the URL's text first
(`reach.node_problems`), then every connection as it opens, before the
test's first question (`portal.pipeline.landing`: the portal's own database
is refused wherever the URL led). A MySQL/MariaDB node shows only the
database it landed in. The views ask `access.may_use` first, so a user tests
only nodes granted to them. Credentials typed for a test are used for that
test and never stored.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import psycopg
import pymysql
from django.conf import settings

from portal.crypto.encrypted import decrypt_properties
from portal.crypto.errors import DecryptionError
from portal.pipeline import landing, pgconn, usernode
from portal.pipeline.confinement import contains, relative_name_problem
from portal.topology import policy, reach
from portal.topology.models import DataNode

DISCOVERY_MAX_FILES = 200
DISCOVERY_MAX_ENTRIES = 20_000  # files and folders looked at under a files node's root
DISCOVERY_MAX_COLUMNS = 5000  # JDBC: columns read from the catalog, all tables together
DATA_SUFFIXES = {".csv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}
SAMPLE_ROWS = 1000  # CSV / JSON lines: rows read to type the columns
SAMPLE_BYTES = 1 << 20  # ... and at most this much of the file
# Column types a watermark can follow as a cursor (ordered, compared with < and >, and exact), by
# their first word in any of the dialects shown (PostgreSQL, MariaDB, SQLite, Spark, Iceberg,
# Arrow): integers and moments. Not `numeric`/`decimal` (a money column grows with nothing) nor a
# float (inexact); `point`, `interval` or `struct<a:bigint>` are not ordered although they contain
# such a word.
_INTEGER = re.compile(
    r"^(?!interval)(?:u?int|tinyint|smallint|mediumint|bigint|integer|\w*serial|long)", re.I
)
_MOMENT = re.compile(r"^(?:timestamp|datetime|smalldatetime|date)", re.IGNORECASE)


@dataclass
class ConnectionResult:
    ok: bool
    message: str
    schemas: list[str] = field(default_factory=list)


@dataclass
class Column:
    name: str
    type: str
    key_position: int = 0  # 1-based place in the table's primary key (0: not in it)
    identity: bool = False  # filled by the database: identity, serial, auto_increment
    candidate: str = ""  # why it is a watermark candidate ("" if it is not one)
    in_file: bool = False  # a data file's column: the files' modification time is the watermark

    @property
    def watermark_suitable(self) -> bool:
        """Of a type a cursor can follow: an integer, a date or a timestamp."""
        kind = self.type.strip()
        return bool(_INTEGER.match(kind) or _MOMENT.match(kind))

    @property
    def watermark_verdict(self) -> str:
        """The one thing discovery's "Watermark?" column says of this column."""
        if self.in_file:
            moment = _MOMENT.match(self.type.strip())
            return f"{_moment_word(self.type)}: files follow their modification time" if moment else "no"
        return f"yes: {self.candidate}" if self.candidate else "no"

    @property
    def watermark_candidate(self) -> bool:
        return bool(self.candidate)

    @property
    def in_primary_key(self) -> bool:
        return self.key_position > 0


@dataclass
class Dataset:
    """A table (`schema.table`) or a data file (its path under the root; `modified` its mtime)."""

    name: str
    columns: list[Column]
    note: str = ""
    modified: float | None = None

    @property
    def watermark_columns(self) -> list[Column]:
        """Candidates first, then the other columns of a type a cursor can follow."""
        suitable = [column for column in self.columns if column.watermark_suitable]
        return [c for c in suitable if c.candidate] + [c for c in suitable if not c.candidate]

    @property
    def watermark_candidates(self) -> list[Column]:
        return [column for column in self.columns if column.candidate]

    @property
    def watermark_candidate_names(self) -> list[str]:
        return [column.name for column in self.watermark_candidates]

    @property
    def primary_key(self) -> list[str]:
        keyed = sorted((c for c in self.columns if c.key_position), key=lambda c: c.key_position)
        return [column.name for column in keyed]

    @property
    def watermark_source(self) -> str:
        """A files source's watermark is the files' modification time; a table's is a column."""
        return "file_modification_time" if self.modified is not None else "column"

    @property
    def modified_at(self) -> dt.datetime | None:
        if self.modified is None:
            return None
        return dt.datetime.fromtimestamp(self.modified, dt.UTC)


def mark_candidates(columns: list[Column]) -> list[Column]:
    """Watermark candidates of a table, from its catalog: columns the database fills in increasing
    order (identity, serial, auto_increment, a single integer primary key such as SQLite's rowid
    alias) and moments (timestamps, dates), which an incremental extract can follow."""
    single_key = sum(1 for column in columns if column.key_position) == 1
    for column in columns:
        kind = column.type.strip()
        if _INTEGER.match(kind) and column.identity:
            column.candidate = "identity column"  # also serial and auto_increment
        elif _INTEGER.match(kind) and single_key and column.key_position:
            column.candidate = "integer primary key"
        elif _MOMENT.match(kind):
            column.candidate = _moment_word(kind)
    return columns


def _moment_word(kind: str) -> str:
    """`date` for a day (SQL's date, Arrow's date32/date64), else `timestamp`."""
    return "date" if re.match(r"^date(?:32|64)?(?:\[\w+\])?$", kind.strip(), re.I) else "timestamp"


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
    if node.user_made and set(problems) & {"url", "catalog.uri"}:  # said as every such refusal is
        return f"Refused: data node '{node.name}': {usernode.REFUSED}"
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
        except landing.LandingRefused as error:
            return ConnectionResult(False, f"Refused: {error}")
        except _Unsupported as error:
            return ConnectionResult(False, str(error))
        except Exception as error:  # the driver's own message, whatever the driver
            return ConnectionResult(False, f"{type(error).__name__}: {str(error).strip()}"[:1000])
        return ConnectionResult(True, f"Connected; {len(schemas)} schema(s).", schemas)
    if node.kind == DataNode.Kind.ICEBERG:
        try:
            namespaces = [".".join(n) for n in _iceberg_catalog(node, password).list_namespaces()]
        except landing.LandingRefused as error:
            return ConnectionResult(False, f"Refused: {error}")
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
        except landing.LandingRefused as error:
            return Discovery(False, f"Refused: {error}")
        except _Unsupported as error:
            return Discovery(False, str(error))
        except Exception as error:
            return Discovery(False, f"{type(error).__name__}: {str(error).strip()}"[:1000])
        return Discovery(True, f"{len(datasets)} table(s).", datasets, truncated)
    if node.kind == DataNode.Kind.ICEBERG:
        try:
            datasets = _iceberg_tables(node, password)
        except landing.LandingRefused as error:
            return Discovery(False, f"Refused: {error}")
        except Exception as error:
            return Discovery(False, f"{type(error).__name__}: {str(error).strip()}"[:1000])
        return Discovery(True, f"{len(datasets)} Iceberg table(s).", datasets)
    return Discovery(False, f"The portal cannot discover a {node.get_kind_display()} node.")


# --- iceberg ----------------------------------------------------------------------------


def _iceberg_catalog(node: DataNode, password: str):
    """The node's SQL catalog, looked at only (its tables are not created), with the short timeout."""
    from portal.pipeline.destinations.iceberg import (
        load_catalog,  # pyiceberg and PySpark load only for an Iceberg node
    )

    properties = node.properties or {}
    uri = reach.catalog_uri(properties.get("catalog.uri", ""))
    if uri.startswith("postgresql") and "connect_timeout" not in uri:
        uri += ("&" if "?" in uri else "?") + f"connect_timeout={_timeout()}"
    warehouse = reach.node_root(properties.get("warehouse", ""))
    return load_catalog(
        uri,
        password or None,
        warehouse,
        create=False,
        portal=reach.portal_landings(),
        what=f"data node '{node.name}'",
        bounds=policy.bounds_for(node),
    )


def _iceberg_tables(node: DataNode, password: str) -> list[Dataset]:
    catalog = _iceberg_catalog(node, password)
    datasets = []
    for namespace in catalog.list_namespaces():
        for identifier in catalog.list_tables(namespace):
            schema = catalog.load_table(identifier).schema()
            keys = list(schema.identifier_field_names())  # Iceberg's row identity: its primary key
            columns = [
                Column(f.name, str(f.field_type), keys.index(f.name) + 1 if f.name in keys else 0)
                for f in schema.fields
            ]
            datasets.append(Dataset(".".join(identifier), mark_candidates(columns)))
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


def discover_folder(node: DataNode, folder: str) -> Discovery:
    """Discovery of the data files in one folder below a files node's root (an upstream flow's
    output, ``<flowGroup>/<flowName>``), named relative to that folder; never outside the root."""
    if (refused := _refusal(node)) is not None:
        return Discovery(False, refused)
    if node.kind != DataNode.Kind.FILES:
        return Discovery(False, f"'{node.name}' is not a files node.")
    return _discover_files(node, folder)


def _discover_files(node: DataNode, folder: str = "") -> Discovery:
    checked = _test_files(node)
    if not checked.ok:
        return Discovery(False, checked.message)
    root = os.path.realpath(_files_root(node) or "")
    if folder:
        below = os.path.realpath(os.path.join(root, folder))
        if relative_name_problem(folder, folders=True) or not contains(root, below):
            return Discovery(False, f"'{folder[:120]}' is not a folder inside the node.")
        root = below
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


# CSV tokens as Spark's CSVInferSchema reads them (Spark 4, default options: preferDate, the default
# date and timestamp parsers); checked against Spark itself in the tests.
_CSV_INT = re.compile(r"[+-]?\d+")
_CSV_DECIMAL = re.compile(r"[+-]?(\d+)\.")  # "1." is a decimal of scale 0 (java.math.BigDecimal)
_CSV_DOUBLE = re.compile(
    r"[\x00-\x20]*[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)[\x00-\x20]*"
)
_CSV_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_ZONE = (
    r"(?:Z|[+-]\d{1,2}(?::?\d{2})?|\s*(?:UTC|GMT|UT)(?:[+-]\d{1,2}(?::?\d{2})?)?|\s*[A-Za-z]+/[A-Za-z_]+)?"
)
_CSV_TIMESTAMP = re.compile(
    r"\s*(?:(?P<y>\d{4})-(?P<m>\d{1,2})(?:-(?P<d>\d{1,2}))?"
    r"(?:[ T](?P<h>\d{1,2}):(?P<mi>\d{1,2})(?::(?P<s>\d{1,2})(?:\.\d{0,9})?)?" + _ZONE + r")?"
    r"|T?(?P<th>\d{1,2}):(?P<tmi>\d{1,2}):(?P<ts>\d{1,2})(?:\.\d{0,9})?" + _ZONE + r")\s*"
)
_INT32 = 2**31
_INT64 = 2**63


def _valid_date(year: str | None, month: str | None, day: str | None) -> bool:
    try:
        dt.date(int(year or 1), int(month or 1), int(day or 1))
    except ValueError:
        return False
    return True


def _csv_token_type(token: str) -> str:
    """The type Spark infers for one non-empty CSV value ("int" before widening)."""
    if _CSV_INT.fullmatch(token):
        value = int(token)
        if -_INT32 <= value < _INT32:
            return "int"
        if -_INT64 <= value < _INT64:
            return "bigint"
        digits = len(token.lstrip("+-").lstrip("0") or "0")
        return f"decimal({digits},0)" if digits <= 38 else "double"
    if match := _CSV_DECIMAL.fullmatch(token):
        digits = len(match.group(1).lstrip("0") or "0")
        return f"decimal({digits},0)" if digits <= 38 else "double"
    if _CSV_DOUBLE.fullmatch(token) or token in ("Inf", "-Inf"):
        return "double"
    if (date := _CSV_DATE.fullmatch(token)) and _valid_date(*date.groups()):
        return "date"
    if moment := _CSV_TIMESTAMP.fullmatch(token):
        parts = moment.groupdict()
        hour, minute, second = (
            (parts["h"], parts["mi"], parts["s"])
            if parts["th"] is None
            else (parts["th"], parts["tmi"], parts["ts"])
        )
        if _valid_date(parts["y"], parts["m"], parts["d"]) and (
            int(hour or 0) < 24 and int(minute or 0) < 60 and int(second or 0) < 60
        ):
            return "timestamp"
    if token.lower() in ("true", "false"):
        return "boolean"
    return "string"


_NUMERIC_RANK = {"int": 0, "bigint": 1}


def _decimal_digits(kind: str) -> int | None:
    if kind.startswith("decimal("):
        return int(kind[len("decimal(") :].split(",")[0])
    return {"int": 10, "bigint": 20}.get(kind)


def _wider(first: str | None, second: str) -> str:
    """Spark's compatible type of two inferred types (CSV and JSON alike), `string` if none."""
    if first is None or first == second:
        return second
    pair = {first, second}
    if pair <= {"int", "bigint"}:
        return "bigint"
    if "double" in pair and all(kind == "double" or _decimal_digits(kind) is not None for kind in pair):
        return "double"
    if all(_decimal_digits(kind) is not None for kind in pair):
        digits = max(_decimal_digits(kind) or 0 for kind in pair)
        return f"decimal({digits},0)" if digits <= 38 else "double"
    if pair == {"date", "timestamp"}:
        return "timestamp"
    return "string"


def _sample(path: str) -> str:
    with open(path, "rb") as handle:
        data = handle.read(SAMPLE_BYTES)
    if len(data) == SAMPLE_BYTES and b"\n" in data:
        data = data[: data.rindex(b"\n") + 1]  # whole lines only
    return data.decode("utf-8", errors="replace")


def _csv_columns(path: str) -> tuple[list[Column], int]:
    rows = csv.reader(io.StringIO(_sample(path), newline=""))
    header = next(rows, [])
    types: list[str | None] = [None] * len(header)
    read = 0
    for row in rows:
        if read >= SAMPLE_ROWS:
            break
        read += 1
        for index, token in enumerate(row[: len(header)]):
            if token:  # empty is null: it does not decide a type
                types[index] = _wider(types[index], _csv_token_type(token))
    names = [name or f"_c{index}" for index, name in enumerate(header)]
    typed = ["bigint" if kind == "int" else kind or "string" for kind in types]  # files._widened
    return [Column(name, kind) for name, kind in zip(names, typed, strict=True)], read


# A JSON type while inferring: an atomic name, ("array", element) or ("struct", fields); None is
# null (it does not decide a type; Spark reads a type never decided as string).
_JsonType = str | tuple[str, Any] | None


def _json_type(value: object) -> _JsonType:
    """Spark's JSON inference of one value (prefersDecimal off: fractions are double)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        if -_INT64 <= value < _INT64:
            return "bigint"
        digits = len(str(abs(value)))
        return f"decimal({digits},0)" if digits <= 38 else "double"
    if isinstance(value, float):
        return "double"
    if isinstance(value, dict):
        fields: dict[str, _JsonType] = {}
        for key, item in value.items():
            fields[key] = _json_merge(fields.get(key), _json_type(item))
        return ("struct", fields)
    if isinstance(value, list):
        element: _JsonType = None
        for item in value:
            element = _json_merge(element, _json_type(item))
        return ("array", element)
    return "string"


def _json_merge(first: _JsonType, second: _JsonType) -> _JsonType:
    if first is None or second is None:
        return second if first is None else first
    if isinstance(first, tuple) and isinstance(second, tuple) and first[0] == second[0]:
        if first[0] == "array":
            return ("array", _json_merge(first[1], second[1]))
        fields = dict(first[1])
        for key, item in second[1].items():
            fields[key] = _json_merge(fields.get(key), item)
        return ("struct", fields)
    if isinstance(first, tuple) or isinstance(second, tuple):
        return "string"
    return _wider(first, second)


def _json_name(kind: _JsonType) -> str:
    """Spark's simpleString of the type (struct fields sorted by name, as Spark infers them)."""
    if kind is None:
        return "string"
    if isinstance(kind, str):
        return kind
    if kind[0] == "array":
        return f"array<{_json_name(kind[1])}>"
    return "struct<" + ",".join(f"{key}:{_json_name(kind[1][key])}" for key in sorted(kind[1])) + ">"


def _json_columns(path: str) -> tuple[list[Column], int, bool]:
    """Columns of JSON lines, sorted by name as Spark's inference gives them; a line that is not a
    JSON object makes Spark add `_corrupt_record`."""
    merged: dict[str, _JsonType] = {}
    read, corrupt = 0, False
    for line in _sample(path).splitlines():
        if read >= SAMPLE_ROWS:
            break
        if not line.strip():
            continue
        read += 1
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            corrupt = True
            continue
        for key, item in value.items():
            merged[key] = _json_merge(merged.get(key), _json_type(item))
    if corrupt:
        merged.setdefault("_corrupt_record", "string")
    return [Column(key, _json_name(merged[key])) for key in sorted(merged)], read, corrupt


def _arrow_type(kind: Any) -> str:
    """A Parquet column's Arrow type as shown: a decimal with its precision and scale as Spark
    names it (`decimal(12,2)`, not `decimal128(12, 2)`), the others as Arrow names them."""
    precision, scale = getattr(kind, "precision", None), getattr(kind, "scale", None)
    if precision is not None and scale is not None and str(kind).startswith("decimal"):
        return f"decimal({precision},{scale})"
    return str(kind)


def _file_dataset(path: str, name: str, kind: str) -> Dataset:
    try:
        modified = os.stat(path).st_mtime
    except OSError:
        modified = None
    try:
        if kind == "csv":
            columns, rows = _csv_columns(path)
            for column in columns:
                column.in_file = True
            return Dataset(name, columns, f"CSV, types from the first {rows} row(s)", modified)
        if kind == "json":
            fields, rows, corrupt = _json_columns(path)
            if not fields or (corrupt and len(fields) == 1):
                return Dataset(name, [], "not JSON lines of objects", modified)
            for column in fields:
                column.in_file = True
            return Dataset(name, fields, f"JSON lines, types from the first {rows} line(s)", modified)
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
        columns = [Column(item.name, _arrow_type(item.type), in_file=True) for item in schema]
        return Dataset(name, columns, "Parquet footer", modified)
    except Exception as error:
        return Dataset(name, [], f"unreadable: {type(error).__name__}: {error}"[:300], modified)


# --- JDBC -------------------------------------------------------------------------------


class _Unsupported(Exception):
    pass


def _credentials(node: DataNode, url: str, user: str, password: str) -> tuple[str, str]:
    """The node's own `user` and `password` (decrypted here, in memory: what a flow over the node
    connects with), else typed for the test, else the URL's own `user`/`password` parameters. As for
    a flow (:func:`portal.pipeline.jobspec.with_node_credentials`), one may type an account only for
    a node without one: a user of a node does not choose who the database takes them for."""
    stored = _stored_credentials(node)
    if stored[0] or stored[1]:
        return stored
    query = parse_qs(url.partition("?")[2].replace(";", "&"))
    in_url = (query.get("user") or [""])[0], (query.get("password") or [""])[0]
    if in_url[0] or in_url[1]:  # the node's account, kept in its URL: no typed one replaces it
        return in_url
    return user, password


def _stored_credentials(node: DataNode) -> tuple[str, str]:
    properties = {k: v for k, v in (node.properties or {}).items() if isinstance(v, str)}
    if properties.get("password"):
        try:
            properties = decrypt_properties(properties)
        except DecryptionError:  # Test connection then says the database's own refusal
            properties.pop("password")
    return properties.get("user", ""), properties.get("password", "")


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
        for table, column, data_type, key_position, identity in rows[:DISCOVERY_MAX_COLUMNS]:
            found = Column(column, data_type, int(key_position or 0), bool(identity))
            tables.setdefault(table, Dataset(table, [])).columns.append(found)
        for dataset in tables.values():
            mark_candidates(dataset.columns)
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
            columns = self._rows("SELECT name, type, pk FROM pragma_table_info(?)", (name,))
            found = [Column(column, kind or "any", int(pk or 0)) for column, kind, pk in columns]
            datasets.append(Dataset(name, mark_candidates(found)))
        return datasets, len(names) > DISCOVERY_MAX_FILES


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


def _judged(node: DataNode, connection: Any) -> landing.Landing:
    """Where a connection landed, before any question of the test: never the portal's own database,
    and a MySQL/MariaDB connection in a database of its own (LandingRefused otherwise)."""
    try:
        found = landing.check(
            connection,
            f"data node '{node.name}'",
            portal=reach.portal_landings(),
            bounds=policy.bounds_for(node),
        )
        landing.own_database(found, {}, f"data node '{node.name}'")
    except BaseException:
        connection.close()
        raise
    return found


def _jdbc_connect(node: DataNode, user: str, password: str) -> _Catalog:
    url = (node.properties or {}).get("url", "")
    target = reach._jdbc_target(url) if url else None
    if target is None:
        raise _Unsupported(
            f"'{url}' is not a JDBC URL the portal can test (jdbc:postgresql://host:port/db …)."
        )
    sub, hosts, database = target
    user, password = _credentials(node, url, user, password)
    if sub == "sqlite":
        path = (database or "").split("?")[0]
        sqlite = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=_timeout())
        _judged(node, sqlite)
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
            connect_timeout=_timeout(),
            # a catalog question on a huge or locked schema also answers within the timeout
            options=f"-c statement_timeout={_timeout() * 1000} -c lock_timeout={_timeout() * 1000}",
            autocommit=True,
        )
        _judged(node, connection)
        return _Catalog(
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
            connect_timeout=_timeout(),
            read_timeout=_timeout(),
            write_timeout=_timeout(),
        )
        _judged(node, connection)
        return _Catalog(connection, _MY_SCHEMAS, _MY_COLUMNS)
    raise _Unsupported(
        f"The portal cannot test jdbc:{sub} URLs (PostgreSQL, MySQL/MariaDB and SQLite only; "
        "the workers still can)."
    )


# --- preview ----------------------------------------------------------------------------

PREVIEW_MAX_ROWS = 20
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}\Z")


@dataclass
class Rows:
    """The first rows of a table: its column names and the rows' values as read."""

    columns: list[str]
    rows: list[tuple[Any, ...]]


class PreviewRefused(Exception):
    """The table cannot be previewed (refused, unsupported, or the database said no); the
    message says why, as Test connection would."""


def _quoted(table: str, quote: str) -> str:
    parts = table.split(".")
    if not 1 <= len(parts) <= 2 or not all(_PLAIN_NAME.match(part) for part in parts):
        raise PreviewRefused(f"'{table[:120]}' is not a table name the portal previews (schema.table).")
    return ".".join(f"{quote}{part}{quote}" for part in parts)


def preview_table(node: DataNode, table: str, limit: int = PREVIEW_MAX_ROWS) -> Rows:
    """The first `limit` rows of `table` of a JDBC node (`SELECT * … LIMIT`), through the same
    rules as Test connection and discovery: the node's URL judged first, the connection judged
    where it landed before the question, the node's own account, the short timeouts."""
    if (refused := _refusal(node)) is not None:
        raise PreviewRefused(refused)
    if node.kind != DataNode.Kind.JDBC:
        raise PreviewRefused(f"The portal previews tables of JDBC nodes only, not of '{node.name}'.")
    limit = max(1, min(int(limit), PREVIEW_MAX_ROWS))
    try:
        with _jdbc_connect(node, "", "") as database:
            quote = "`" if isinstance(database.connection, pymysql.connections.Connection) else '"'
            cursor = database.connection.cursor()
            try:
                cursor.execute(f"SELECT * FROM {_quoted(table, quote)} LIMIT {limit}")  # noqa: S608
                columns = [str(column[0]) for column in cursor.description or []]
                rows = [tuple(row) for row in cursor.fetchmany(limit)]
            finally:
                cursor.close()
    except PreviewRefused:
        raise
    except landing.LandingRefused as error:
        raise PreviewRefused(f"Refused: {error}") from error
    except _Unsupported as error:
        raise PreviewRefused(str(error)) from error
    except Exception as error:  # the driver's own message, whatever the driver
        raise PreviewRefused(f"{type(error).__name__}: {str(error).strip()}"[:1000]) from error
    return Rows(columns, rows)


def preview_iceberg(node: DataNode, identifier: str, limit: int = PREVIEW_MAX_ROWS) -> Rows:
    """The first `limit` rows of Iceberg table `identifier` (``namespace.table``) of a node whose
    SQL catalog needs no password (a catalog's password is a flow's secret, not the node's): the
    catalog judged where it lands as Test connection judges it, its files read only inside the
    node's warehouse (`load_catalog`'s confinement), at most `limit` rows scanned."""
    if (refused := _refusal(node)) is not None:
        raise PreviewRefused(refused)
    if node.kind != DataNode.Kind.ICEBERG:
        raise PreviewRefused(f"'{node.name}' is not an Iceberg node.")
    parts = identifier.split(".")
    if len(parts) != 2 or not all(_PLAIN_NAME.match(part) for part in parts):
        raise PreviewRefused(f"'{identifier[:120]}' is not an Iceberg table name the portal previews.")
    limit = max(1, min(int(limit), PREVIEW_MAX_ROWS))
    try:
        table = _iceberg_catalog(node, "").load_table((parts[0], parts[1]))
        arrow = table.scan(limit=limit).to_arrow()
    except landing.LandingRefused as error:
        raise PreviewRefused(f"Refused: {error}") from error
    except Exception as error:  # pyiceberg's, SQLAlchemy's and the driver's own message
        raise PreviewRefused(f"{type(error).__name__}: {str(error).strip()}"[:1000]) from error
    return Rows(list(arrow.schema.names), [tuple(row.values()) for row in arrow.to_pylist()[:limit]])
