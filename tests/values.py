"""A table of every kind of value PostgreSQL offers, for the stories that carry it somewhere and
read it back (change data capture, JDBC reads): integers at their limits, numeric at its precision's
edge and unconstrained, NaN and infinities, text with quotes, newlines, tabs, backslashes, emoji,
CJK and the literal strings NULL and \\N, empty against NULL, bytea with every byte, dates before
1970 and after 2038, timestamps with and without a time zone (offsets -12 to +14, microseconds),
time, interval, uuid, json, jsonb and arrays."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

COLUMNS = {
    "id": "int PRIMARY KEY",
    "i2": "smallint",
    "i4": "integer",
    "i8": "bigint",
    "n": "numeric(12,2)",
    "nn": "numeric",
    "f4": "real",
    "f8": "double precision",
    "t": "text",
    "vc": "varchar(20)",
    "b": "bytea",
    "ok": "boolean",
    "d": "date",
    "tm": "time",
    "ts": "timestamp",
    "tstz": "timestamptz",
    "iv": "interval",
    "u": "uuid",
    "j": "json",
    "jb": "jsonb",
    "arr": "int[]",
    "tags": "text[]",
}
# Parquet's type for each (the rest: the server's text of the value)
PARQUET = {
    "id": pa.int32(), "i2": pa.int16(), "i4": pa.int32(), "i8": pa.int64(), "n": pa.decimal128(12, 2),
    "f4": pa.float32(), "f8": pa.float64(), "b": pa.binary(), "ok": pa.bool_(), "d": pa.date32(),
    "ts": pa.timestamp("us"), "tstz": pa.timestamp("us", tz="UTC"), "nn": pa.decimal128(38, 18),
}  # fmt: skip
EVERY_BYTE = "'\\x" + bytes(range(256)).hex() + "'"
ROWS = [
    "(1, -32768, -2147483648, -9223372036854775808, -9999999999.99, 1e-18, 'NaN', 'NaN',"
    " E'quote '' \" back\\\\slash\\nnew\\ttab', 'NULL', " + EVERY_BYTE + ", true, '1969-12-31', '00:00:00',"
    " '1901-12-14 20:45:52.000001', '1969-12-31 23:59:59.999999-12', '-1 year -2 mons +3 days -04:05:06.7',"
    ' \'00000000-0000-0000-0000-000000000000\', \'{"b": 1,  "a": [1, 2.50]}\', \'{"b": 1, "a": null}\','
    " '{1,NULL,-3}', ARRAY['a,b', 'NULL', '', NULL, '\"q\"'])",
    "(2, 32767, 2147483647, 9223372036854775807, 9999999999.99, 12345678901234567890.123456789012345678,"
    " 'Infinity', '-Infinity', '🙂 中文 \\N', '\\N', '\\x00', false, '2040-02-29', '23:59:59.999999',"
    " '2262-04-11 23:47:16.854775', '2040-01-02 03:04:05.123456+14', '1 day 00:00:00.000001',"
    " 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '[]', '[\"x\", {\"y\": \"z\"}]', '{}', '{}')",
    "(3, 0, 0, 0, 0.01, -0.000001, '-Infinity', 'Infinity', '', '', '\\x', NULL, '0001-01-01', '12:00',"
    " '1970-01-01 00:00:00', '2000-01-01 00:00:00+05:45', '0', 'ffffffff-ffff-ffff-ffff-ffffffffffff',"
    " 'null', '\"text\"', NULL, NULL)",
    "(4" + ", NULL" * (len(COLUMNS) - 1) + ")",
]


def create_sql(table: str) -> str:
    return f"CREATE TABLE {table} ({', '.join(f'{name} {kind}' for name, kind in COLUMNS.items())})"


def texts(conn: Any, table: str) -> list[tuple[Any, ...]]:
    """Each row's values as PostgreSQL prints them, for value-for-value comparison across types."""
    select = ", ".join(f"{name}::text" for name in COLUMNS)
    table, _, where = table.partition(" WHERE ")
    condition = f" WHERE {where}" if where else ""
    return conn.execute(f"SELECT {select} FROM {table} AS src{condition} ORDER BY src.id").fetchall()  # noqa: S608


def column_types(conn: Any, table: str) -> dict[str, str]:
    """Each column's type as PostgreSQL names it (``numeric(12,2)``, ``timestamp without time zone``)."""
    rows = conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
        " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
        (table,),
    ).fetchall()
    return {name: kind for name, kind in rows if name in COLUMNS}


def assert_same_row(
    got: dict[str, Any], want: dict[str, Any], text: dict[str, Any], typed: Iterable[str]
) -> None:
    """A row read back from Parquet against the source's: ``want`` as psycopg reads the source row,
    ``text`` as PostgreSQL prints it (for the columns not ``typed``: carried as that text)."""
    typed = set(typed)
    for column in COLUMNS:
        value, found = want[column], got[column]
        if column not in typed:  # the server's own text
            assert found == text[column], (want["id"], column)
        elif isinstance(value, float) and value != value:
            assert found != found, (want["id"], column)
        elif column == "tstz" and value is not None:
            assert found == value.astimezone(dt.UTC), (want["id"], column)
        elif column == "b" and value is not None:
            assert found == bytes(value), (want["id"], column)
        else:
            assert found == value, (want["id"], column)
