"""Change data capture from a MariaDB binary log (row-based), read with ``mysql-replication``.

A binlog needs no slot: the server keeps its files for ``expire_logs_days``/``binlog_expire_logs_seconds``
whatever its readers do, so a position older than the oldest file is lost (:func:`available`), and
nothing is created or dropped on the server. A position is ``<binlog file>:<offset, 12 digits>``:
text that sorts in log order (the server numbers its files with leading zeros).

The first read of a table is a snapshot: ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and MariaDB's
``binlog_snapshot_file``/``binlog_snapshot_position``, the binlog position that snapshot matches
exactly (MySQL has no such status; it is refused). The server must log rows with their column names:
``log_bin`` on, ``binlog_format=ROW``, ``binlog_row_metadata=FULL`` (MariaDB 10.5+).

The SQL connection is judged where it lands (:mod:`portal.pipeline.landing`): never the portal's own
database, and the tables only in the database the connection landed in; the binlog stream, which
carries every database of the server, is filtered to that database.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlparse

from portal.pipeline import landing
from portal.pipeline.errors import ConfigError, PipelineError

Position = tuple[str, int]
_SPARK_TYPES = {
    "tinyint": "int",
    "smallint": "int",
    "mediumint": "int",
    "int": "int",
    "bigint": "bigint",
    "float": "float",
    "double": "double",
    "date": "date",
    "datetime": "timestamp",
    "timestamp": "timestamp",
}


def format_position(position: Position) -> str:
    return f"{position[0]}:{position[1]:012d}"


def parse_position(text: str) -> Position:
    name, sep, offset = text.strip().rpartition(":")
    if not sep or not name or not offset.isdigit():
        raise ValueError(f"'{text}' is not a binlog position like binlog.000001:000000000325")
    return name, int(offset)


@dataclass(frozen=True)
class Server:
    """Where the node points, and who connects (the stream opens connections of its own)."""

    host: str
    port: int
    database: str
    user: str
    password: str

    def settings(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "user": self.user, "passwd": self.password}


def server_of(url: str, user: str | None, password: str | None) -> Server:
    parsed = urlparse(url[len("jdbc:") :])
    params = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    database = (parsed.path or "/").lstrip("/")
    if not database:
        raise ConfigError("source.jdbc.url: change data capture needs the node's database in its URL")
    return Server(
        parsed.hostname or "localhost",
        parsed.port or 3306,
        database,
        user or params.get("user") or "",
        password or params.get("password") or "",
    )


def connect(
    server: Server, tables: Sequence[str], *, what: str, portal: Iterable[landing.Landing] | None
) -> Any:
    """A PyMySQL connection, refused before any statement of ours when it landed in the portal's own
    database or when a captured table lies outside the database it landed in."""
    import pymysql  # the MariaDB driver: loaded only by a MariaDB source

    conn = pymysql.connect(
        host=server.host,
        port=server.port,
        database=server.database,
        user=server.user,
        password=server.password,
        autocommit=True,
    )
    try:
        found = landing.check(conn, what, portal=portal)
        landing.own_database(found, {"source.cdc.tables": list(tables)}, what)
    except BaseException:
        conn.close()
        raise
    return conn


def _one(conn: Any, statement: str) -> tuple[Any, ...] | None:
    with conn.cursor() as cur:
        cur.execute(statement)
        row = cur.fetchone()
    return tuple(row) if row else None


def check_server(conn: Any, what: str) -> None:
    values = {}
    with conn.cursor() as cur:
        cur.execute(
            "SHOW VARIABLES WHERE Variable_name IN ('log_bin', 'binlog_format', 'binlog_row_metadata', 'version')"
        )
        values = {str(k).lower(): str(v) for k, v in cur.fetchall()}
    if "mariadb" not in values.get("version", "").lower():
        raise ConfigError(
            f"{what}: binlog change data capture reads MariaDB (its consistent snapshot position)"
        )
    wanted = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_metadata": "FULL"}
    wrong = [f"{k}={values.get(k, '?')}" for k, v in wanted.items() if values.get(k, "").upper() != v]
    if wrong:
        raise ConfigError(
            f"{what}: change data capture needs log_bin=ON, binlog_format=ROW and binlog_row_metadata=FULL "
            f"on the server (it has {', '.join(wrong)})"
        )


def current(conn: Any) -> Position:
    row = _one(conn, "SHOW MASTER STATUS")
    if row is None:
        raise ConfigError("the server writes no binary log (log_bin is off)")
    return str(row[0]), int(row[1])


def available(conn: Any, position: Position) -> bool:
    """Whether the server still has the binlog file of ``position``."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return any(str(row[0]) == position[0] for row in cur.fetchall())


def columns(conn: Any, table: str) -> list[tuple[str, str]]:
    """``(name, Spark type)`` of the table's columns in order; empty when there is no such table."""
    schema, _, name = table.partition(".")
    with conn.cursor() as cur:
        cur.execute(
            "SELECT column_name, data_type, numeric_precision, numeric_scale FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            (schema, name),
        )
        rows = cur.fetchall()
    found = []
    for column, kind, precision, scale in rows:
        kind = str(kind).lower()
        spark = f"decimal({precision},{scale})" if kind == "decimal" else _SPARK_TYPES.get(kind, "string")
        found.append((str(column), spark))
    return found


def text(value: Any) -> str | None:
    """A value in the text form Spark casts back (what PostgreSQL's log sends as text)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, Decimal)):
        return str(value)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)


def snapshot(conn: Any, tables: Sequence[tuple[str, Sequence[str]]], batch: int = 10_000) -> Iterator[Any]:
    """In one consistent snapshot: first its binlog position, then ``(table, rows)`` batches with
    values as text."""
    with conn.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        try:
            cur.execute(
                "SHOW STATUS WHERE Variable_name IN ('binlog_snapshot_file', 'binlog_snapshot_position')"
            )
            status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
            yield status["binlog_snapshot_file"], int(status["binlog_snapshot_position"])
            for table, names in tables:
                schema, _, name = table.partition(".")
                select = ", ".join(f"`{n.replace('`', '``')}`" for n in names)
                cur.execute(f"SELECT {select} FROM `{schema}`.`{name}`")  # noqa: S608 - quoted, checked names
                while rows := cur.fetchmany(batch):
                    yield table, [tuple(text(v) for v in row) for row in rows]
        finally:
            cur.execute("COMMIT")


@dataclass
class RowChange:
    op: str
    table: str
    values: dict[str, str | None]
    position: Position
    index: int
    commit_time: dt.datetime


def server_id(name: str) -> int:
    """The replica id the stream announces: stable per flow, far from the small ids servers use."""
    return 1_000_000 + int(hashlib.sha256(name.encode()).hexdigest()[:7], 16)


def changes(
    server: Server, name: str, start: Position, upto: Position, tables: Sequence[str]
) -> Iterator[RowChange]:
    """The row changes of ``tables`` after ``start`` up to ``upto``, in log order."""
    from pymysqlreplication import BinLogStreamReader  # type: ignore[import-untyped]
    from pymysqlreplication.row_event import (  # type: ignore[import-untyped]
        DeleteRowsEvent,
        UpdateRowsEvent,
        WriteRowsEvent,
    )

    wanted = {t.partition(".")[2]: t for t in tables}
    stream = BinLogStreamReader(
        connection_settings=server.settings(),
        server_id=server_id(name),
        blocking=False,
        resume_stream=True,
        log_file=start[0],
        log_pos=start[1],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=[server.database],
        is_mariadb=True,
    )
    try:
        for event in stream:
            position = (str(stream.log_file), int(event.packet.log_pos))
            if position > upto:
                break
            table = wanted.get(event.table)
            if table is None:
                continue
            stamp = dt.datetime.fromtimestamp(event.timestamp, dt.UTC)
            for index, row in enumerate(event.rows):
                if isinstance(event, UpdateRowsEvent):
                    op, values = "u", row["after_values"]
                else:
                    op, values = ("c" if isinstance(event, WriteRowsEvent) else "d"), row["values"]
                if any(str(k).startswith("UNKNOWN_COL") for k in values):
                    raise PipelineError("the binlog carries no column names: set binlog_row_metadata=FULL")
                yield RowChange(op, table, {k: text(v) for k, v in values.items()}, position, index, stamp)
    finally:
        stream.close()
