"""PostgreSQL extraction through COPY into Arrow batches, inside Spark tasks.

Spark's JDBC reader decodes a result set row by row on the JVM.  Here each Spark task reads its
slice of the work unit's query with PostgreSQL's bulk protocol instead: the ADBC driver
(``adbc-driver-postgresql``) runs the query as ``COPY (...) TO STDOUT (FORMAT binary)`` and hands
back Arrow record batches, which ``DataFrame.mapInArrow`` passes to Spark without a per-row step.

Same rows, same types as the JDBC reader.  The schema is the one Spark's JDBC reader derives for the
query (so both paths give a dataset the same schema), the slices are the ones it would read for
``partitionColumn``/``lowerBound``/``upperBound``/``numPartitions`` (the first also takes NULL keys,
the first and last are open-ended), and each column's values are converted as the JDBC reader
converts them: text for string columns (uuid, json, inet, ... as PostgreSQL prints them, in the
session time zone the JDBC driver would set), decimals
rounded half-up to the column's scale, ``timestamp without time zone`` read as wall-clock time in
the JVM's default zone (``ResultSet.getTimestamp``), ``timestamptz`` as the instant it is.

Where it pays (``source.jdbc.arrow``, default ``auto``): measured by tests/bench/bench_extract.py on a
2-core machine, this reader handing its batches to Spark's own writer was no faster than Spark's
JDBC reader (each task adds a Python worker and an Arrow hand-over into the JVM's rows), while the
Python workers writing the batches to Parquet themselves (:mod:`portal.pipeline.destinations.directwrite`) take
about 60 % of its time.  So ``auto`` makes the scan (:func:`scan_for`) for that writer and keeps
Spark's JDBC reader as the DataFrame everything else reads; ``true`` makes the scan the DataFrame
too (where the JVM's row decoding is the bottleneck: more cores, a remote database — measure);
``false`` never reads with Arrow.

Fallback: Spark's JDBC reader is kept when the URL is not ``jdbc:postgresql://`` or carries
parameters libpq does not share, the driver is not installed, or a column has a type this reader
does not convert (arrays, intervals, ...).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from portal.pipeline import landing
from portal.pipeline.properties import Properties
from portal.pipeline.sources.base import ArrowScan
from portal.pipeline.spark.gateway import jvm

# JDBC URL parameters that mean the same to libpq (anything else: keep the JDBC reader).
_LIBPQ_PARAMS = {
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "connect_timeout",
    "application_name",
    "options",
}
_SIMPLE = (
    T.BooleanType,
    T.ByteType,
    T.ShortType,
    T.IntegerType,
    T.LongType,
    T.FloatType,
    T.DoubleType,
    T.DateType,
    T.BinaryType,
    T.TimestampNTZType,
)


def driver_installed() -> bool:
    return (
        importlib.util.find_spec("adbc_driver_postgresql") is not None
        and importlib.util.find_spec("pyarrow") is not None
    )


def libpq_uri(url: str, user: str | None, password: str | None) -> str | None:
    """The ``postgresql://`` URI of a ``jdbc:postgresql://host[:port]/db[?params]`` URL, or None
    when it names several hosts or a parameter libpq does not understand the same way."""
    if not url.startswith("jdbc:postgresql://"):
        return None
    parsed = urlparse(url[len("jdbc:") :])
    params = parse_qsl(parsed.query)
    if "," in parsed.netloc or any(k not in _LIBPQ_PARAMS | {"user", "password"} for k, _ in params):
        return None
    named = dict(params)
    user, password = user or named.pop("user", None), password or named.pop("password", None)
    named.pop("user", None), named.pop("password", None)
    auth = ""
    if user:
        auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "") + "@"
    host = parsed.hostname or "localhost"
    host = f"[{host}]" if ":" in host else host
    port = f":{parsed.port}" if parsed.port else ""
    query = f"?{urlencode(named)}" if named else ""
    return f"postgresql://{auth}{host}{port}{parsed.path or '/'}{query}"


def jvm_zone(spark: SparkSession) -> str:
    """The JVM's default time zone: the session zone PostgreSQL's JDBC driver sets."""
    return str(jvm(spark).java.util.TimeZone.getDefault().getID())


def set_jdbc_session(cursor: Any, zone: str) -> None:
    """Give a libpq session what the JDBC driver gives its own, so values printed as text (time values
    in particular) read as the JDBC reader's queries read them: the zone (:func:`jvm_zone`), ISO dates."""
    cursor.execute("SET TIME ZONE '{}'".format(zone.replace("'", "''")))
    cursor.execute("SET DateStyle = 'ISO'")


@dataclass(frozen=True)
class Slices:
    """Spark's JDBC partitioning of a numeric column: ``count`` slices of ``[lower, upper)``."""

    column: str
    lower: int
    upper: int
    count: int

    def conditions(self) -> list[str]:
        """The WHERE clause of each slice, as Spark's ``JDBCRelation.columnPartition`` writes them."""
        count = max(1, min(self.count, self.upper - self.lower))
        if count == 1:
            return ["1=1"]
        stride = _truncated(self.upper, count) - _truncated(self.lower, count)  # Scala's Long division
        col, bounds = self.column, [self.lower + stride * i for i in range(1, count)]
        conditions = [f"{col} < {bounds[0]} OR {col} IS NULL"]
        conditions += [f"{col} >= {a} AND {col} < {b}" for a, b in itertools.pairwise(bounds)]
        conditions.append(f"{col} >= {bounds[-1]}")
        return conditions


def _truncated(a: int, b: int) -> int:
    return abs(a) // b * (1 if a >= 0 else -1)


def read_or_keep(jdbc: DataFrame, props: Properties, subquery: str, slices: Slices | None) -> DataFrame:
    """The Arrow reader's DataFrame of ``subquery`` where it can read it and ``source.jdbc.arrow`` is
    ``true`` (see the module docstring), else ``jdbc`` — Spark's JDBC reader's DataFrame of the same
    query and slices."""
    scan = scan_for(jdbc, props, subquery, slices)
    return scan.frame(jdbc.sparkSession) if scan and frames_too(props) else jdbc


def frames_too(props: Properties) -> bool:
    """Whether the scan is also the DataFrame Spark reads (``source.jdbc.arrow=true``)."""
    return props.get_choice("source.jdbc.arrow") == "true"


def scan_for(
    jdbc: DataFrame,
    props: Properties,
    subquery: str,
    slices: Slices | None,
    *,
    portal: Sequence[landing.Landing] | None = None,
    what: str = "source.jdbc.url",
    proved: landing.Landing | None = None,
) -> ArrowScan | None:
    """The Arrow reader's scan of ``subquery`` with ``jdbc``'s schema (Spark's JDBC reader's DataFrame
    of the same query), one slice per Spark task; None where it cannot read it (module docstring).
    Each task's connection is judged as it opens (:mod:`portal.pipeline.landing`): ``portal`` are the
    portal's own databases (default: this process's), ``what`` the node a refusal names; ``proved``
    where a judged login's probe landed (:func:`portal.pipeline.landing.check_jdbc`), which each of
    them must share (ADBC cannot say whether the server asked for the password)."""
    if props.get_choice("source.jdbc.arrow") == "false" or not driver_installed():
        return None
    uri = libpq_uri(
        props.get("source.jdbc.url") or "",
        props.get("source.conn.username"),
        props.get("source.conn.password"),
    )
    if uri is None:
        return None
    schema = jdbc.schema
    selected = [_select(f) for f in schema.fields]
    columns = [c for c in selected if c is not None]
    if len(columns) < len(selected):
        return None
    conditions = slices.conditions() if slices else ["1=1"]
    queries = [f"SELECT {', '.join(columns)} FROM {subquery} WHERE {c}" for c in conditions]  # noqa: S608
    zone = jvm_zone(jdbc.sparkSession)
    own = tuple(landing.portal_databases() if portal is None else portal)
    reader = _SliceReader(queries, uri, schema.json(), zone, own, what, proved)
    return ArrowScan(len(queries), reader, schema)


def _select(field: T.StructField) -> str | None:
    """The SQL expression that gives a column as the converter below expects it (None: unsupported)."""
    name = '"' + field.name.replace('"', '""') + '"'
    dtype = field.dataType
    if isinstance(dtype, T.StringType):  # the type's text output, as getString (char(n) keeps its padding)
        return f"CASE WHEN {name} IS NULL THEN NULL ELSE concat({name}) END AS {name}"
    if isinstance(dtype, T.DecimalType):  # ROUND_HALF_UP to the scale, as the JDBC reader's setScale
        return f"CAST(CAST({name} AS numeric({dtype.precision},{dtype.scale})) AS text) AS {name}"
    if isinstance(dtype, _SIMPLE) or type(dtype) is T.TimestampType:
        return name
    return None


class _SliceReader:
    """Runs in the Python workers: reads the numbered slices as Arrow batches (a SliceReader)."""

    def __init__(
        self,
        queries: list[str],
        uri: str,
        schema_json: str,
        jvm_zone: str,
        portal: tuple[landing.Landing, ...] = (),
        what: str = "source.jdbc.url",
        proved: landing.Landing | None = None,
    ) -> None:
        self.queries, self.uri, self.schema_json, self.jvm_zone = queries, uri, schema_json, jvm_zone
        self.portal, self.what, self.proved = portal, what, proved

    def batches(self, numbers: Iterable[int]) -> Iterator[Any]:
        import adbc_driver_postgresql.dbapi as adbc

        schema = T.StructType.fromJson(json.loads(self.schema_json))
        with adbc.connect(self.uri) as conn, conn.cursor() as cur:
            found = landing.check(conn, self.what, portal=self.portal, engine=landing.POSTGRESQL)
            if self.proved is not None and not found.same_database(self.proved):
                raise landing.LandingRefused(f"{self.what}: not where its login was proved; refused")
            set_jdbc_session(cur, self.jvm_zone)
            for number in numbers:
                cur.execute(self.queries[number])
                for chunk in cur.fetch_record_batch():
                    yield _convert(chunk, schema, self.jvm_zone)


def _convert(batch: Any, schema: T.StructType, jvm_zone: str) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    arrays = []
    for field, array in zip(schema.fields, batch.columns, strict=True):
        dtype = field.dataType
        if isinstance(array.type, pa.ExtensionType):
            array = array.storage
        if isinstance(dtype, T.DecimalType):
            array = pc.cast(array, pa.decimal128(dtype.precision, dtype.scale))
        elif type(dtype) is T.TimestampType:
            if array.type.tz is None:  # wall-clock time in the JVM's zone, as getTimestamp reads it
                array = pc.assume_timezone(array, jvm_zone, ambiguous="earliest", nonexistent="latest")
            array = array.cast(pa.timestamp("us", tz="UTC"))
        else:
            array = array.cast(_arrow_type(dtype))
        if isinstance(dtype, (T.DateType, T.TimestampType, T.TimestampNTZType)):
            _refuse_out_of_range(field.name, dtype, array)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, names=schema.fieldNames())


# Spark's dates and time stamps run from 0001-01-01 to 9999-12-31, as days and microseconds since
# 1970: PostgreSQL's infinity arrives from the server's binary form as a number far outside them
# (the driver shifts the server's 2000 epoch to 1970 and wraps), a date before the common era as a
# year 0 or less.
_DAYS = (-719_162, 2_932_896)
_MICROS = (-62_135_596_800_000_000, 253_402_300_799_999_999)
_SHIFT = {"D": 10_957, "us": 946_684_800_000_000}  # 2000-01-01 since 1970-01-01
_BITS = {"D": 32, "us": 64}


def _refuse_out_of_range(name: str, dtype: T.DataType, array: Any) -> None:
    """Fail the read naming the column and the value where one is outside Spark's range, as the JDBC
    reader's cast does (:meth:`portal.pipeline.sources.jdbc_types.Reading.keep`): never a wrapped
    number."""
    import pyarrow as pa
    import pyarrow.compute as pc

    unit = "D" if isinstance(dtype, T.DateType) else "us"
    low, high = _DAYS if unit == "D" else _MICROS
    numbers = array.cast(pa.int32() if unit == "D" else pa.int64())
    bounds = pc.min_max(numbers)
    least, most = bounds["min"].as_py(), bounds["max"].as_py()
    if least is None or low <= least <= most <= high:
        return
    value = least if least < low else most
    raise ValueError(
        f"column '{name}' holds '{_shown(value, unit)}', which Spark's {dtype.simpleString()} cannot hold"
        " (it runs from 0001-01-01 to 9999-12-31)"
    )


def _shown(value: int, unit: str) -> str:
    """The server's text of an out-of-range value: ``infinity``, or the date (year 0 is 1 BC)."""
    import numpy as np

    wrap = 1 << _BITS[unit]
    server = (value - _SHIFT[unit] + wrap // 2) % wrap - wrap // 2  # back to the server's epoch
    if server in (wrap // 2 - 1, -(wrap // 2)):
        return "infinity" if server > 0 else "-infinity"
    moment = np.datetime64(value, "D") if unit == "D" else np.datetime64(value, "us")
    return str(moment).replace("T", " ")


def _arrow_type(dtype: T.DataType) -> Any:
    import pyarrow as pa

    simple: dict[type[T.DataType], Any] = {
        T.BooleanType: pa.bool_(),
        T.ByteType: pa.int8(),
        T.ShortType: pa.int16(),
        T.IntegerType: pa.int32(),
        T.LongType: pa.int64(),
        T.FloatType: pa.float32(),
        T.DoubleType: pa.float64(),
        T.DateType: pa.date32(),
        T.BinaryType: pa.binary(),
        T.StringType: pa.string(),
        T.TimestampNTZType: pa.timestamp("us"),
    }
    return simple[type(dtype)]
