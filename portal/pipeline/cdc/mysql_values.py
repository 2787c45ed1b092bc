"""MariaDB values as change data capture carries them: the Spark type each column is cast to, and
the one text each value takes whether the snapshot (the SQL client) or the binlog
(``mysql-replication``) read it, so a change log never holds one value in two spellings.

- A ``BIT(n)`` is its ``n`` binary digits (the binlog's form; the SQL client sends raw bytes).
- A ``FLOAT`` is read by the snapshot as a double: the server's text of a ``FLOAT`` keeps 6
  digits, which do not give its 32 bits back (the binlog sends the 32 bits).
- A ``TIME`` is the server's text (``-838:59:59.000000``, as many fractional digits as the column
  has): it spans ±838 hours, which no time-of-day type holds.
- A ``SET`` is its members in the column's order joined by commas, the empty set ``''`` (the
  binlog library gives a Python set, and ``None`` for the empty one).
- A ``YEAR`` is its number, ``0`` for ``0000`` (which the binlog library reads as 1900).
- ``INT UNSIGNED`` is a bigint, ``BIGINT UNSIGNED`` a ``decimal(20,0)``; ``DATETIME`` a wall time
  (Spark's ``timestamp_ntz``), ``TIMESTAMP`` an instant (read in UTC: the connection's zone is
  ``+00:00``, and the binlog sends seconds since the epoch).
- A ``UUID`` is its text (the binlog sends its 16 bytes).
- Binary columns (charset 63) stay bytes, a ``BINARY(n)`` padded with the NULs the binlog leaves out.
- A zero date (``0000-00-00``, a zero month or day) is refused naming its table and column: the
  SQL client gives it as text, the binlog library as ``None`` (a ``TIMESTAMP``'s as the epoch).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from portal.pipeline.errors import PipelineError

_SPARK_TYPES = {
    "tinyint": "int",
    "smallint": "int",
    "mediumint": "int",
    "int": "int",
    "bigint": "bigint",
    "float": "float",
    "double": "double",
    "date": "date",
    "datetime": "timestamp_ntz",  # a wall time, as PostgreSQL's timestamp without time zone
    "timestamp": "timestamp",  # an instant
    "year": "int",
    # charset 63 (binary): kept as bytes end to end, never decoded as text
    "binary": "binary",
    "varbinary": "binary",
    "tinyblob": "binary",
    "blob": "binary",
    "mediumblob": "binary",
    "longblob": "binary",
}
_UNSIGNED = {"int": "bigint", "bigint": "decimal(20,0)"}  # the smaller ones fit an int as they are


def columns(conn: Any, table: str) -> list[tuple[str, str]]:
    """``(name, Spark type)`` of the table's columns in order; empty when there is no such table."""
    schema, _, name = table.partition(".")
    with conn.cursor() as cur:
        cur.execute(
            "SELECT column_name, data_type, numeric_precision, numeric_scale, column_type"
            " FROM information_schema.columns WHERE table_schema = %s AND table_name = %s"
            " ORDER BY ordinal_position",
            (schema, name),
        )
        rows = cur.fetchall()
    found = []
    for column, kind, precision, scale, full in rows:
        kind = str(kind).lower()
        if kind == "decimal" and int(precision) > 38:
            spark = "string"  # wider than Spark's decimals: its text, every digit (README, "Types")
        elif kind == "decimal":
            spark = f"decimal({precision},{scale})"
        elif "unsigned" in str(full).lower() and kind in _UNSIGNED:
            spark = _UNSIGNED[kind]
        else:
            spark = _SPARK_TYPES.get(kind, "string")
        found.append((str(column), spark))
    return found


def select_from(conn: Any, table: str, names: Sequence[str]) -> str:
    """``SELECT <names> FROM <table>`` as a snapshot reads it: a ``BIT(n)`` as its ``n`` binary
    digits, a ``FLOAT`` as a double, a ``TIME`` as the server's text (the module docstring says
    why). Names are quoted here, whatever they hold."""
    schema, _, name = table.partition(".")
    with conn.cursor() as cur:
        cur.execute(
            "SELECT column_name, data_type, numeric_precision FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = %s AND data_type IN ('bit', 'float', 'time')",
            (schema, name),
        )
        special = {str(column): (str(kind).lower(), width) for column, kind, width in cur.fetchall()}

    def quote(identifier: str) -> str:
        return f"`{identifier.replace('`', '``')}`"

    def read(n: str) -> str:
        kind, width = special.get(n, ("", 0))
        if kind == "bit":
            return f"LPAD(BIN({quote(n)}), {int(width)}, '0') AS {quote(n)}"
        if kind == "float":
            return f"CAST({quote(n)} AS DOUBLE) AS {quote(n)}"
        if kind == "time":
            return f"CAST({quote(n)} AS CHAR) AS {quote(n)}"
        return quote(n)

    return f"SELECT {', '.join(read(n) for n in names)} FROM {quote(schema)}.{quote(name)}"  # noqa: S608


def uuids(conn: Any, table: str) -> set[str]:
    """The table's ``UUID`` columns (MariaDB 10.7+): the snapshot reads their text, the binlog
    sends their 16 bytes, which look like a ``BINARY(16)``'s there."""
    schema, _, name = table.partition(".")
    with conn.cursor() as cur:
        cur.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = %s AND data_type = 'uuid'",
            (schema, name),
        )
        return {str(r[0]) for r in cur.fetchall()}


def uuid_text(value: Any) -> Any:
    """A ``UUID`` the binlog sent as its 16 bytes, as its text (as the snapshot reads it)."""
    return str(uuid.UUID(bytes=bytes(value))) if isinstance(value, (bytes, bytearray)) else value


def text(value: Any) -> str | bytes | None:
    """A value in the text form Spark casts back (what PostgreSQL's log sends as text); the bytes
    of a binary column (BLOB, BINARY, VARBINARY: charset 63, which the binlog's FULL row metadata
    and the SQL client both send undecoded) stay bytes, every one of them."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, Decimal):
        return format(value, "f")  # 0 of a DECIMAL(65,30) is '0.000…', not str()'s '0E-30'
    if isinstance(value, dt.date):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return str(value)


class ZeroDate(ValueError):
    """A zero date (``0000-00-00``, or a zero month or day) where the server's ``sql_mode`` let one
    in: no date type of Spark or of a destination holds it, and NULL would be another value."""

    def __init__(self, column: str, value: Any) -> None:
        super().__init__(column, value)
        self.column, self.value = column, value

    def message(self, table: str) -> str:
        return (
            f"{table}: column '{self.column}' holds the zero date '{self.value}', which no date type "
            "holds (it would arrive as NULL or not at all): set it to NULL or a real date on the source "
            "(sql_mode NO_ZERO_DATE,NO_ZERO_IN_DATE keeps new ones out)"
        )


_DATED = (7, 10, 12, 14)  # the SQL client's TIMESTAMP, DATE, DATETIME, NEWDATE


def snapshot_rows(
    table: str, description: Sequence[Any], rows: Sequence[Sequence[Any]]
) -> list[tuple[Any, ...]]:
    """A snapshot's rows as text; a zero date, which the SQL client gives as its text where it gives
    a date otherwise, is refused naming its column."""
    dated = [i for i, d in enumerate(description) if d[1] in _DATED]
    for row in rows:
        for i in dated:
            if isinstance(row[i], str):
                raise PipelineError(ZeroDate(str(description[i][0]), row[i]).message(table))
    return [tuple(text(v) for v in row) for row in rows]


def time_text(value: dt.timedelta, digits: int) -> str:
    """A ``TIME`` as the server writes it: ``[-]HH:MM:SS[.ffffff]``, hours past 24, ``digits``
    fractional digits."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    seconds, fraction = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    tail = f".{fraction:06d}"[: digits + 1] if digits else ""
    return f"{sign}{hours:02d}:{minute:02d}:{second:02d}{tail}"


Form = Callable[[Any, str], "str | bytes | None"]


def forms(columns: Sequence[Any]) -> dict[str, Form]:
    """How each column of a row event turns its binlog value (and why the library gave ``None``:
    its ``none_sources``) into the snapshot's text; the columns not named here take :func:`text`."""
    from pymysqlreplication.constants import FIELD_TYPE  # type: ignore[import-untyped]  # the binlog library: loaded only by a MariaDB source

    found: dict[str, Form] = {}
    for c in columns:
        if c.character_set_name == "binary" and c.type != FIELD_TYPE.BIT:
            width = (c.max_length or 0) if c.type == FIELD_TYPE.STRING else 0
            found[c.name] = _padded(width)
        elif c.type in (FIELD_TYPE.TIME, FIELD_TYPE.TIME2):
            found[c.name] = _time(getattr(c, "fsp", 0) or 0)
        elif c.type == FIELD_TYPE.SET:
            found[c.name] = _members(list(c.set_values or []))
        elif c.type in (FIELD_TYPE.DATE, FIELD_TYPE.DATETIME, FIELD_TYPE.DATETIME2, FIELD_TYPE.NEWDATE):
            found[c.name] = _dated(c.name, lambda v, why: why.startswith("out of"))
        elif c.type in (FIELD_TYPE.TIMESTAMP, FIELD_TYPE.TIMESTAMP2):  # 0 s: the zero TIMESTAMP
            found[c.name] = _dated(c.name, lambda v, _why: v == dt.datetime(1970, 1, 1))
        elif c.type == FIELD_TYPE.YEAR:
            found[c.name] = lambda v, _why: None if v is None else str(0 if v == 1900 else v)
    return found


def _padded(width: int) -> Form:
    """A binary column's bytes: the binlog leaves out a ``BINARY(n)``'s trailing NUL bytes (as it
    leaves out a ``CHAR``'s trailing spaces) which the table holds, and the library gives an empty
    value as ``''``."""

    def form(value: Any, _why: str) -> str | bytes | None:
        if isinstance(value, (str, bytes)):
            return (value.encode() if isinstance(value, str) else value).ljust(width, b"\0")
        return text(value)

    return form


def _dated(column: str, zero: Callable[[Any, str], bool]) -> Form:
    """A date or time stamp; a zero date (which the library gives as ``None`` or the epoch) refused."""

    def form(value: Any, why: str) -> str | bytes | None:
        if zero(value, why):
            raise ZeroDate(column, "0000-00-00")
        return text(value)

    return form


def _time(digits: int) -> Form:
    """The binlog's ``TIME``; ``mysql-replication`` (1.0) reads a negative one with a fraction as
    ``-(seconds + 1 - fraction)`` (``-00:00:00.000001`` as ``-00:00:00.999999``), its two parts
    read apart from one two's complement: put back together here."""

    def form(value: Any, _why: str) -> str | bytes | None:
        if not isinstance(value, dt.timedelta):
            return text(value)
        if value < dt.timedelta(0) and value.microseconds:
            whole = -value
            seconds = whole - dt.timedelta(microseconds=whole.microseconds)
            value = -(seconds + dt.timedelta(microseconds=1_000_000 - whole.microseconds))
        return time_text(value, digits)

    return form


def _members(order: list[str]) -> Form:
    def form(value: Any, why: str) -> str | None:
        if value is None:
            return "" if why == "empty set" else None
        return ",".join(m for m in order if m in value)

    return form


def row_text(
    table: str, values: Mapping[str, Any], why: Mapping[str, Any], forms: Mapping[str, Form]
) -> dict[str, Any]:
    """A binlog row's values as text (``why``: the library's ``none_sources`` of the row)."""
    try:
        return {k: forms[k](v, str(why.get(k, ""))) if k in forms else text(v) for k, v in values.items()}
    except ZeroDate as zero:
        raise PipelineError(zero.message(table)) from None
