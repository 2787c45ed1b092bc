"""What a JDBC source reads each column as, so that every value arrives as it left.

Spark's JDBC reader maps a column by its ``java.sql.Types`` code alone, and two of those mappings
change values: a ``timestamp without time zone`` (MariaDB ``DATETIME``) becomes an instant in the
JVM's zone, and a ``time`` becomes a timestamp on 1970-01-01 cut to milliseconds. Spark 4 keeps the
driver's own type name in each field's metadata (``jdbcClientType``), so the reader is told
(``customSchema``) to read the first as a wall time (``TIMESTAMP_NTZ``) and the second as the
server's text, every microsecond kept. MariaDB's driver builds a date before 1582 in the Julian
calendar (1000-01-01 arrived as 1000-01-06), so its ``DATE`` and ``DATETIME`` are read as the
server's text and cast in Spark, whose calendar is the proleptic Gregorian one the server's is.

An unconstrained PostgreSQL ``numeric`` (Spark would round it to ``decimal(38,18)``) and a
``numeric(p,s)``/``DECIMAL(p,s)`` wider than Spark's 38 digits (Spark would cut its fraction) are
read as the server's text too, unless the flow compares or splits on them (its watermark, key or
partition column).
A dataset whose recorded schema (an earlier run's) has such a column in Spark's own mapping keeps
it: its earlier files and tables hold that type, and a schema policy would see a change.

A PostgreSQL type Spark has none for (jsonb, uuid, interval, time, inet, ...) arrives as text;
the field's metadata keeps the source's type (:data:`portal.pipeline.sources.base.SQL_TYPE`), so a
PostgreSQL destination creates that type and takes the text back exactly, as the cdc source's
columns do. ``json`` is not kept: it has no equality operator, which a history compares rows by.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from portal.pipeline.dialects import POSTGRESQL, Dialect
from portal.pipeline.sources.base import SQL_TYPE

CLIENT_TYPE = "jdbcClientType"  # the driver's type name, as Spark 4's JDBC reader records it
# Timestamps without a zone, by dialect (MariaDB's TIMESTAMP is an instant, its DATETIME is not).
_WALL_TIMES = {"postgresql": {"timestamp"}, "mysql": {"datetime"}}
_TIMES = {"time", "timetz"}
# MariaDB's dates and wall times: read as text, cast back to these Spark types.
_MARIADB_DATES = {"mysql": {"date": "date", "datetime": "timestamp_ntz"}}
# PostgreSQL types read as text that a PostgreSQL destination keeps (each has an equality operator).
_PG_KEPT = {"jsonb", "uuid", "interval", "inet", "cidr", "macaddr", "macaddr8", "time", "timetz"}


@dataclass(frozen=True)
class Reading:
    """How to read a table: Spark's ``customSchema`` (None: Spark's own mapping is right) and the
    source types to keep in the fields' metadata, by column."""

    custom_schema: str | None = None
    kept: dict[str, str] = field(default_factory=dict)
    # Columns read as text to be cast back to their Spark type (MariaDB's dates), by column.
    casts: dict[str, str] = field(default_factory=dict)

    def keep(self, df: DataFrame) -> DataFrame:
        """``df`` with the text-read dates cast back and the kept source types in its fields'
        metadata."""
        for name, spark_type in self.casts.items():
            df = df.withColumn(name, F.col(f"`{name.replace('`', '``')}`").cast(spark_type))
        for name, sql_type in self.kept.items():
            df = df.withMetadata(name, {**_metadata(df, name), SQL_TYPE: sql_type})
        return df


def _metadata(df: DataFrame, name: str) -> dict[str, object]:
    return dict(df.schema[name].metadata or {})


def reading(
    schema: T.StructType,
    dialect: Dialect,
    compared: Collection[str] = (),
    recorded: T.StructType | None = None,
) -> Reading:
    """The reading of a table whose columns Spark's JDBC reader gives as ``schema``; ``compared``:
    the columns the flow compares or splits on, which keep a numeric type; ``recorded``: the
    dataset's schema as an earlier run recorded it (its columns keep the types they had)."""
    custom: list[tuple[str, str]] = []
    kept: dict[str, str] = {}
    casts: dict[str, str] = {}
    earlier = {f.name: f.dataType for f in recorded.fields} if recorded else {}
    for column in schema.fields:
        client = str((column.metadata or {}).get(CLIENT_TYPE, "")).lower()
        read_as = _read_as(column, client, dialect, compared)
        if read_as and earlier.get(column.name) == column.dataType:
            continue  # recorded in Spark's own mapping: the dataset keeps it
        if read_as:
            custom.append((column.name, read_as))
        if read_as == "STRING" and client in _MARIADB_DATES.get(dialect.name, {}):
            casts[column.name] = _MARIADB_DATES[dialect.name][client]
        if dialect is POSTGRESQL and client in _PG_KEPT:
            kept[column.name] = client
        elif read_as == "STRING" and client == "numeric":
            kept[column.name] = "numeric"
    text = ", ".join(f"`{name.replace('`', '``')}` {kind}" for name, kind in custom)
    return Reading(text or None, kept, casts)


def _read_as(column: T.StructField, client: str, dialect: Dialect, compared: Collection[str]) -> str | None:
    """The Spark type to read ``column`` as instead of Spark's own (None: Spark's is right)."""
    wider = dialect.read_as.get(column.dataType.typeName())
    if wider:
        return wider
    if isinstance(column.dataType, T.TimestampType) and client in _TIMES:
        return "STRING"
    if client in _MARIADB_DATES.get(dialect.name, {}):
        return "STRING"  # cast back in Spark (:meth:`Reading.keep`)
    if type(column.dataType) is T.TimestampType and client in _WALL_TIMES.get(dialect.name, ()):
        return "TIMESTAMP_NTZ"
    unconstrained = (
        dialect is POSTGRESQL
        and client == "numeric"
        and column.dataType == T.DecimalType(38, 18)
        and (column.metadata or {}).get("scale") == 0  # the driver's answer for a numeric without a scale
    )
    return "STRING" if (unconstrained or _too_wide(column, client)) and column.name not in compared else None


def _too_wide(column: T.StructField, client: str) -> bool:
    """A ``numeric(p,s)``/``DECIMAL(p,s)`` wider than Spark's 38 digits, which Spark reads as
    ``decimal(38, s')`` with fewer fraction digits than the column's ``s`` (``numeric(50,10)`` as
    ``decimal(38,0)``: 1.0123456789 would arrive as 1). Read as the server's text instead."""
    scale = (column.metadata or {}).get("scale")
    return (
        isinstance(column.dataType, T.DecimalType)
        and client in ("numeric", "decimal")
        and isinstance(scale, int)
        and scale != column.dataType.scale
    )
