"""What a JDBC source reads each column as, so that every value arrives as it left.

Spark's JDBC reader maps a column by its ``java.sql.Types`` code alone, and two of those mappings
change values: a ``timestamp without time zone`` (MariaDB ``DATETIME``) becomes an instant in the
JVM's zone, and a ``time`` becomes a timestamp on 1970-01-01 cut to milliseconds. Spark 4 keeps the
driver's own type name in each field's metadata (``jdbcClientType``), so the reader is told
(``customSchema``) to read the first as a wall time (``TIMESTAMP_NTZ``) and the second as the
server's text, every microsecond kept. Both drivers build a date or time stamp as a
``java.sql`` value, whose calendar is the Julian one before 1582-10-15: MariaDB's 1000-01-01
arrived as 1000-01-06, and the ten days that calendar skips (1582-10-05 to 14) arrived ten days
later from either server. So dates and time stamps are printed by the server (:attr:`Reading.texts`),
read as that text and cast back in Spark, whose calendar is the proleptic Gregorian one the servers
use; a text Spark cannot hold (a date before the common era, ``infinity``) fails the read naming
its column.

An unconstrained PostgreSQL ``numeric`` (Spark would round it to ``decimal(38,18)``) and a
``numeric(p,s)``/``DECIMAL(p,s)`` wider than Spark's 38 digits (Spark would cut its fraction, or
fail at a value of more than 38 digits without naming the column) are read as the server's text
too; an unconstrained one only where the flow does not compare or split on it (its watermark, key
or partition column), a wider one unless Spark splits the read on it (its bounds are numbers there; a
watermark or key is compared as the server's text, on the server). Spark's
schema does not say a column's precision: a decimal at Spark's 38 whose scale is the column's may be
wider, which only the catalog says (:func:`capped`, :func:`precision_query`).
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

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from portal.pipeline.dialects import POSTGRESQL, Dialect
from portal.pipeline.sources.base import SQL_TYPE

CLIENT_TYPE = "jdbcClientType"  # the driver's type name, as Spark 4's JDBC reader records it
_TIMES = {"time", "timetz"}
# Dates and time stamps, by dialect and client type: the Spark type the server's text is cast back
# to, and the SQL that prints it. A wall time stays one (MariaDB's DATETIME; its TIMESTAMP, an
# instant after 1970, is right as Spark reads it); an instant is printed in UTC, marked so.
_CALENDAR = {
    "postgresql": {
        "date": ("date", "CAST({} AS text)"),
        "timestamp": ("timestamp_ntz", "CAST({} AS text)"),
        "timestamptz": ("timestamp", "CAST({} AT TIME ZONE 'UTC' AS text) || 'Z'"),
    },
    "mysql": {"date": ("date", "CAST({} AS CHAR)"), "datetime": ("timestamp_ntz", "CAST({} AS CHAR)")},
}
# PostgreSQL's arrays of them, which Spark's reader builds element by element the same way: read as
# text arrays (Spark's own reading of a text[]), cast back element by element.
_CALENDAR_ARRAYS = {
    "postgresql": {
        "_date": ("array<date>", "CAST({} AS text[])"),
        "_timestamp": ("array<timestamp_ntz>", "CAST({} AS text[])"),
        "_timestamptz": (
            "array<timestamp>",
            "CASE WHEN {0} IS NULL THEN NULL ELSE ARRAY(SELECT CAST(e AT TIME ZONE 'UTC' AS text) || 'Z'"
            " FROM unnest({0}) WITH ORDINALITY AS u(e, o) ORDER BY o) END",
        ),
    },
}
# The Spark type each reading ends in, to tell whether it changes a recorded column's type.
_ENDS_AS = {
    "STRING": T.StringType(),
    "TIMESTAMP_NTZ": T.TimestampNTZType(),
    "BIGINT": T.LongType(),
    "date": T.DateType(),
    "timestamp_ntz": T.TimestampNTZType(),
    "timestamp": T.TimestampType(),
    "array<date>": T.ArrayType(T.DateType()),
    "array<timestamp_ntz>": T.ArrayType(T.TimestampNTZType()),
    "array<timestamp>": T.ArrayType(T.TimestampType()),
}
# PostgreSQL types read as text that a PostgreSQL destination keeps (each has an equality operator).
_PG_KEPT = {"jsonb", "uuid", "interval", "inet", "cidr", "macaddr", "macaddr8", "time", "timetz"}


@dataclass(frozen=True)
class Reading:
    """How to read a table: Spark's ``customSchema`` (None: Spark's own mapping is right) and the
    source types to keep in the fields' metadata, by column."""

    custom_schema: str | None = None
    kept: dict[str, str] = field(default_factory=dict)
    # Columns read as text to be cast back to their Spark type (dates, time stamps), by column.
    casts: dict[str, str] = field(default_factory=dict)
    # The SQL that prints each of those columns, by column (its name quoted in it).
    texts: dict[str, str] = field(default_factory=dict)
    # Wall times a dataset recorded as instants (Spark's own mapping: the wall time in the JVM's zone),
    # by column: that zone.
    zoned: dict[str, str] = field(default_factory=dict)

    def query(self, subquery: str, columns: list[str], dialect: Dialect) -> str:
        """``subquery`` (``(SELECT ...) AS alias``) with :attr:`texts` in place of their columns:
        what Spark's reader reads."""
        if not self.texts:
            return subquery
        listed = ", ".join(self.texts.get(c) or _quoted(c, dialect) for c in columns)
        return f"(SELECT {listed} FROM {subquery}) AS fp_text"  # noqa: S608 - quoted names

    def keep(self, df: DataFrame) -> DataFrame:
        """``df`` with the text-read dates cast back and the kept source types in its fields'
        metadata."""
        for name, spark_type in self.casts.items():
            text = F.col(f"`{name.replace('`', '``')}`")
            value = text.try_cast(spark_type)
            if spark_type.startswith("array<"):
                lost = F.exists(F.zip_with(text, value, _not_held), lambda held: held)
                shown = F.array_join(text, ", ", "NULL")
            else:
                lost, shown = _not_held(text, value), text
            message = F.concat(
                F.lit(f"column '{name}' holds '"), shown, F.lit(f"', which Spark's {spark_type} cannot hold")
            )
            if name in self.zoned:
                value = F.to_utc_timestamp(value, self.zoned[name])
            df = df.withColumn(name, F.when(lost, F.raise_error(message)).otherwise(value))
        for name, sql_type in self.kept.items():
            df = df.withMetadata(name, {**_metadata(df, name), SQL_TYPE: sql_type})
        return df


def _not_held(text: Column, value: Column) -> Column:
    """Whether Spark's cast lost the server's text: no value for it (``infinity``), or a date
    before the common era (Spark's reading of ``0001-12-31 BC`` drops the era)."""
    return text.isNotNull() & (value.isNull() | text.endswith(" BC"))


def _quoted(name: str, dialect: Dialect) -> str:
    q = dialect.quote_char
    return q + name.replace(q, q + q) + q


def _metadata(df: DataFrame, name: str) -> dict[str, object]:
    return dict(df.schema[name].metadata or {})


def capped(schema: T.StructType) -> list[str]:
    """The decimal columns of ``schema`` at Spark's 38 digits whose scale is the column's: each
    may be a ``numeric(p,s)`` with ``p`` over 38 (the catalog says, :func:`precision_query`)."""
    return [
        f.name
        for f in schema.fields
        if isinstance(f.dataType, T.DecimalType)
        and f.dataType.precision == 38
        and (f.metadata or {}).get("scale") == f.dataType.scale
    ]


def precision_query(table: str, dialect: Dialect) -> str | None:
    """A query of ``table``'s decimal columns wider than 38 digits, as rows ``(c, p)``: name and
    precision (None: the dialect has no such columns). ``table`` as the flow names it."""
    if dialect is POSTGRESQL:  # the server resolves the name as the extract's SELECT does
        return (
            "SELECT attname AS c, ((atttypmod - 4) >> 16) & 65535 AS p FROM pg_attribute"  # noqa: S608
            f" WHERE attrelid = to_regclass({dialect.literal(table)}) AND atttypid = 1700"
            " AND atttypmod >= 4 AND ((atttypmod - 4) >> 16) & 65535 > 38 AND NOT attisdropped"
        )
    if dialect.name != "mysql":
        return None
    database, _, name = (part.strip('"`') for part in table.rpartition("."))
    schema = dialect.literal(database) if database else "DATABASE()"
    return (
        "SELECT column_name AS c, numeric_precision AS p FROM information_schema.columns"  # noqa: S608
        f" WHERE table_schema = {schema} AND table_name = {dialect.literal(name)}"
        " AND data_type = 'decimal' AND numeric_precision > 38"
    )


def reading(
    schema: T.StructType,
    dialect: Dialect,
    compared: Collection[str] = (),
    recorded: T.StructType | None = None,
    wide: Collection[str] = (),
    split_on: str | None = None,
    zone: str = "UTC",
) -> Reading:
    """The reading of a table whose columns Spark's JDBC reader gives as ``schema``; ``compared``:
    the columns the flow compares or splits on, which keep a numeric type; ``recorded``: the
    dataset's schema as an earlier run recorded it (its columns keep the types they had);
    ``wide``: the decimal columns the catalog says are wider than 38 digits; ``split_on``: the
    column Spark's reader splits the read on; ``zone``: the JVM's, in which Spark's own mapping reads
    a wall time as an instant."""
    custom: list[tuple[str, str]] = []
    kept: dict[str, str] = {}
    casts: dict[str, str] = {}
    texts: dict[str, str] = {}
    zoned: dict[str, str] = {}
    earlier = {f.name: f.dataType for f in recorded.fields} if recorded else {}
    for column in schema.fields:
        client = str((column.metadata or {}).get(CLIENT_TYPE, "")).lower()
        read_as = _read_as(column, client, dialect, compared, column.name in wide, split_on)
        if read_as == "STRING":
            calendar = _CALENDAR.get(dialect.name, {}).get(client)
        else:
            calendar = _CALENDAR_ARRAYS.get(dialect.name, {}).get(client)
        ends_as = _ENDS_AS.get(calendar[0] if calendar else read_as or "")
        if (read_as or calendar) and earlier.get(column.name) == column.dataType != ends_as:
            if not (calendar and ends_as == T.TimestampNTZType()):
                continue  # recorded in Spark's own mapping: the dataset keeps it
            # a wall time recorded as Spark's instant: that instant, in the servers' calendar
            calendar, zoned[column.name] = ("timestamp", calendar[1]), zone
        if read_as:
            custom.append((column.name, read_as))
        if calendar:
            casts[column.name] = calendar[0]
            texts[column.name] = (
                f"{calendar[1].format(_quoted(column.name, dialect))} AS {_quoted(column.name, dialect)}"
            )
        if dialect is POSTGRESQL and client in _PG_KEPT:
            kept[column.name] = client
        elif read_as == "STRING" and client == "numeric":
            kept[column.name] = "numeric"  # any precision: the server's text fits it
    text = ", ".join(f"`{name.replace('`', '``')}` {kind}" for name, kind in custom)
    return Reading(text or None, kept, casts, texts, zoned)


def _read_as(
    column: T.StructField,
    client: str,
    dialect: Dialect,
    compared: Collection[str],
    wide: bool = False,
    split_on: str | None = None,
) -> str | None:
    """The Spark type to read ``column`` as instead of Spark's own (None: Spark's is right)."""
    wider = dialect.read_as.get(column.dataType.typeName())
    if wider:
        return wider
    if isinstance(column.dataType, T.TimestampType) and client in _TIMES:
        return "STRING"
    if client in _CALENDAR.get(dialect.name, {}):
        return "STRING"  # the server's text, cast back in Spark (:meth:`Reading.keep`)
    unconstrained = (
        dialect is POSTGRESQL
        and client == "numeric"
        and column.dataType == T.DecimalType(38, 18)
        and (column.metadata or {}).get("scale") == 0  # the driver's answer for a numeric without a scale
    )
    if unconstrained:  # a watermark's, key's or split's values are compared as numbers in Spark
        return "STRING" if column.name not in compared else None
    if (wide or _too_wide(column, client)) and column.name != split_on:
        return "STRING"  # every digit; Spark's decimal would cut it or fail at it
    return None


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
