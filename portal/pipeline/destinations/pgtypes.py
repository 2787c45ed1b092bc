"""The column types a PostgreSQL destination creates: Spark's JDBC writer's for Spark's types, or
the source's own where the extract kept it (:data:`portal.pipeline.sources.base.SQL_TYPE`: jsonb,
uuid, time, interval, ... whose text the server reads back as that type). Shared by the JDBC
writer's staging tables and the direct ``COPY`` path (:mod:`portal.pipeline.destinations.directcopy`),
which must make the very table Spark's writer would."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql
from pyspark.sql import types as T

from portal.pipeline.sources.base import SQL_TYPE

# Spark's JDBC writer's column types on PostgreSQL (its PostgresDialect and JdbcUtils' defaults).
_TYPES = {
    T.StringType: "TEXT",
    T.BooleanType: "BOOLEAN",
    T.ByteType: "SMALLINT",
    T.ShortType: "SMALLINT",
    T.IntegerType: "INTEGER",
    T.LongType: "BIGINT",
    T.FloatType: "FLOAT4",
    T.DoubleType: "FLOAT8",
    T.DateType: "DATE",
    T.TimestampType: "TIMESTAMPTZ",  # Spark 4's instants
    T.TimestampNTZType: "TIMESTAMP",  # a wall time without a zone, as the source has it
    T.BinaryType: "BYTEA",  # the source's hex text, which the server reads back as the bytes
}


def column_type(
    dtype: T.DataType, metadata: dict[str, Any] | None = None, *, arrays: bool = False
) -> str | None:
    """The column type Spark's JDBC writer gives ``dtype`` on PostgreSQL (None: one not made here),
    or the source's own type the extract kept (jsonb, uuid, time, ...: its text is that type's);
    ``arrays``: an array of such types too (Spark's writer sends them; a CSV copy cannot)."""
    if metadata and metadata.get(SQL_TYPE):
        return str(metadata[SQL_TYPE])
    if isinstance(dtype, T.DecimalType):
        return f"NUMERIC({dtype.precision},{dtype.scale})"
    if isinstance(dtype, T.ArrayType) and arrays:
        inner = column_type(dtype.elementType)
        return f"{inner}[]" if inner else None
    return _TYPES.get(type(dtype))


def kept_any(schema: T.StructType) -> bool:
    """Whether a field of ``schema`` keeps its source's type."""
    return any((f.metadata or {}).get(SQL_TYPE) for f in schema.fields)


def dated(dtype: T.DataType) -> bool:
    """A date or time stamp, or an array of them: sent as text
    (:func:`portal.pipeline.destinations.jdbc.dates_as_text`)."""
    if isinstance(dtype, T.ArrayType):
        return dated(dtype.elementType)
    return isinstance(dtype, (T.DateType, T.TimestampType, T.TimestampNTZType))


def dated_any(schema: T.StructType) -> bool:
    """Whether a field of ``schema`` is :func:`dated`."""
    return any(dated(f.dataType) for f in schema.fields)


def columns_sql(columns: Sequence[tuple[str, str | None]]) -> sql.Composed:
    """``"name" TYPE, ...`` of a CREATE TABLE."""
    return sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(t or "")) for n, t in columns
    )
