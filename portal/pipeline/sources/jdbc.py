"""JDBC source: PostgreSQL, MySQL/MariaDB and SQLite via Spark's JDBC reader.

The SQL it writes is in the database's own dialect (:mod:`portal.pipeline.dialects`, chosen by the
URL); the driver class is the node's ``source.jdbc.driver`` or the dialect's.

One dataset per table in ``source.jdbc.tables`` (urn = the table name as written).  Incremental by
the watermark column ``extract.delta.fields`` (numeric, date or timestamp): a run reads
``low < column <= expected high`` where expected high is the column's max at planning time, split
into ``source.jdbc.ranges`` consecutive ranges (default 1).  ``extract.is.full=true`` reads the
whole table every run (snapshot).  Reads are partitioned by a numeric key
(``source.jdbc.partition.column``, default the first ``extract.primary.key.fields``) into
``source.jdbc.num.partitions`` parallel queries.

Late-arriving rows (committed after a run read past their watermark value): ``extract.lookback``
(a number for numeric columns, seconds or ``30s``/``5m``/``2h``/``1d`` for temporal ones) makes the
first range start that much below the previous watermark; rows of the window that were already
delivered are recognised by a hash of ``extract.primary.key.fields`` + the watermark column kept in
the watermark (see :mod:`portal.pipeline.watermarks`) and dropped, so nothing is delivered twice.
At most ``extract.lookback.max.keys`` (default 100000) rows may sit in one window.

Backfill (``JobSpec.backfill``): a listed table reads ``low < column <= min(high, column max)`` with
``low``/``high`` written like the column's values (``2024-05-01 00:00:00``, ``2024-05-01``,
``1500``; a time without an offset is UTC, on a ``timestamptz`` column too), split into
``source.jdbc.ranges`` like any run, without look-back (the range is explicit);
tables not listed are not read.  A snapshot table (``extract.is.full``) cannot be backfilled.

Before anything is read, the source opens one connection as Spark will (same URL, driver and
properties) and asks the server where it landed (:mod:`portal.pipeline.landing`): the portal's own
database is refused, and so, on MySQL/MariaDB, is a table name or pattern naming another database
than the one the connection landed in. The planning queries' and the Arrow reader's own connections
are judged the same way as they open.

PostgreSQL tables can be read with COPY into Arrow batches inside the Spark tasks
(:mod:`portal.pipeline.sources.arrow_pg`, which says when that pays, and ``source.jdbc.arrow``);
otherwise, and for what that reader cannot read, Spark's JDBC reader.  A table is a live source: a second query may see other
rows, so the extract is marked ``Extraction.stage`` and the runtime stages it once when the task
would read it twice (:mod:`portal.pipeline.feed`).
Values in the generated SQL come from the database's own text output; identifiers are validated.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from decimal import Decimal
from typing import Any

import psycopg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from portal.pipeline import cancelling, landing, usernode, watermarks
from portal.pipeline.dialects import Dialect, dialect_for, root_cause
from portal.pipeline.errors import ConfigError, MissingPropertyError, PipelineError
from portal.pipeline.propertyrules import missing_message, spec_for
from portal.pipeline.sources import arrow_pg, jdbc_tables, jdbc_types
from portal.pipeline.sources.base import Extraction, Source
from portal.pipeline.workunits import WorkUnit

log = logging.getLogger(__name__)

_IDENT = re.compile(r'^[A-Za-z_"][A-Za-z0-9_$".]*$')
_DURATION = re.compile(r"^(?P<n>\d+(\.\d+)?)\s*(?P<unit>[smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
NUMERIC = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType)
TEMPORAL = (T.TimestampType, T.TimestampNTZType, T.DateType)
# Spark splits a read on a column between bounds it takes as 64-bit numbers: a key beyond them (a
# numeric(45,0)'s) is read in one piece.
_LONG = (-(2**63), 2**63 - 1)


def _ident(name: str, key: str) -> str:
    if not _IDENT.match(name):
        raise ConfigError(f"{key}: '{name}' is not a valid SQL identifier")
    return name


class _Kind:
    """Arithmetic on watermark values of one column type, done on the database's text form.

    Timestamps compare as instants: a value without an offset (a ``timestamp without time zone``
    column, or a bound written ``2013-03-01 05:00:00``) is taken as UTC, so a naive backfill bound
    works on a ``timestamptz`` column whose text carries an offset. Once any value carried an offset,
    formatted values carry ``+00:00`` (explicit in the SQL, whatever the session's time zone)."""

    def __init__(self, dtype: T.DataType) -> None:
        self.temporal = isinstance(dtype, TEMPORAL)
        self.is_date = isinstance(dtype, T.DateType)
        self.aware = False

    def parse(self, text: str) -> Any:
        if self.is_date:
            return dt.date.fromisoformat(text)
        if self.temporal:
            value = dt.datetime.fromisoformat(text)
            if value.tzinfo is None:
                return value.replace(tzinfo=dt.UTC)
            self.aware = True
            return value.astimezone(dt.UTC)
        return Decimal(text) if any(c in text for c in ".eE") else int(text)

    def format(self, value: Any) -> str:
        if self.is_date:
            return str(value.isoformat())
        if self.temporal:
            if value.tzinfo is not None and not self.aware:
                value = value.astimezone(dt.UTC).replace(tzinfo=None)
            return str(value.isoformat(sep=" "))
        return str(value)

    def minus(self, text: str, amount: str) -> str:
        value = self.parse(text)
        if self.temporal:
            match = _DURATION.match(amount.strip().lower())
            if not match:
                raise ConfigError(f"extract.lookback: '{amount}' is not a duration like 300, 30s, 5m, 2h, 1d")
            seconds = float(match.group("n")) * _UNITS[match.group("unit")]
            return self.format(value - dt.timedelta(seconds=seconds))
        try:
            return self.format(value - (Decimal(amount) if isinstance(value, Decimal) else int(amount)))
        except (ValueError, ArithmeticError):
            raise ConfigError(f"extract.lookback: '{amount}' is not a number") from None

    def split(self, start: str, end: str, parts: int) -> list[str]:
        """Boundaries start < b1 < ... < end (duplicates from rounding removed)."""
        a, b = self.parse(start), self.parse(end)
        points = []
        for i in range(1, parts):
            if self.is_date:
                points.append(self.format(a + dt.timedelta(days=((b - a).days * i) // parts)))
            elif self.temporal:
                points.append(self.format(a + (b - a) * i / parts))
            elif isinstance(a, int):
                points.append(self.format(a + ((b - a) * i) // parts))
            else:
                points.append(self.format(a + (b - a) * i / parts))
        result: list[str] = []
        for p in [*points, end]:
            if self.parse(p) > a and (not result or self.parse(p) > self.parse(result[-1])):
                result.append(p)
        return result


class JdbcSource(Source):
    """See the module docstring for keys and semantics."""

    _landing: landing.Landing | None = None

    @property
    def dialect(self) -> Dialect:
        return dialect_for(self.props.require("source.jdbc.url"))

    def _options(self) -> dict[str, str]:
        options = {
            "url": self.dialect.spark_url(self.props.require("source.jdbc.url")),
            "driver": self.props.get("source.jdbc.driver") or self.dialect.driver,
            "fetchsize": self.props.get("source.jdbc.fetchsize", "10000") or "10000",
        }
        user = self.props.get("source.conn.username")
        password = self.props.get("source.conn.password")
        if user:
            options["user"] = user
        if password:
            options["password"] = password
        return options

    @property
    def what(self) -> str:
        """The node a refusal names (the URL's key when the job names none)."""
        return landing.node_what(self.jobspec.extra, "source", "source.jdbc.url")

    def portal(self) -> tuple[landing.Landing, ...]:
        return landing.portal_databases(self.jobspec.extra)

    def bounds(self) -> usernode.Bounds | None:
        """The source login's bounds: a user-made node's or a flow's own (None: a trusted account)."""
        return usernode.from_spec(self.jobspec.extra, "source")

    def landed(self) -> landing.Landing:
        """Where the source's connections land, asked once of a connection opened as Spark opens its
        own, before anything is read; refused when it is the portal's own database or, on
        MySQL/MariaDB, when a table name reaches out of the database it landed in."""
        found = self._landing
        if found is None:
            bounds = self.bounds()
            found = landing.check_jdbc(
                self.spark, self._options(), self.what, portal=self.portal(), bounds=bounds
            )
            names = {
                key: self.props.get_list(key) for key in (jdbc_tables.TABLES_KEY, jdbc_tables.EXCLUDE_KEY)
            }
            landing.own_database(found, names, self.what, bounds)
            self._landing = found
        return found

    @property
    def statement_tag(self) -> str:
        """The tag this job's statements carry, so a kill can cancel them on the server."""
        return cancelling.statement_tag(self.jobspec.job_name, self.jobspec.execution_id)

    def cancel_statements(self) -> None:
        if self._landing is None:  # never connected: nothing runs there
            return
        stopped = cancelling.cancel_statements(
            self.spark, self._options(), self.dialect.name, self.statement_tag
        )
        log.info("%s: %d running statement(s) of this job cancelled on the server", self.what, stopped)

    def _read(self, query: str, **options: str) -> DataFrame:
        reader = self.spark.read.format("jdbc").options(**self._options(), **options)
        return reader.option("dbtable", query).load()

    def _settings(self) -> dict[str, Any]:
        full = self.props.get_bool("extract.is.full", False)
        delta = self.props.get_list("extract.delta.fields")
        if not delta and not full:  # the schema's message: the save refuses this flow with it
            spec = spec_for("extract.delta.fields")
            raise MissingPropertyError(missing_message(self.props.describe("extract.delta.fields"), spec))
        keys = [
            _ident(k, "extract.primary.key.fields") for k in self.props.get_list("extract.primary.key.fields")
        ]
        lookback = self.props.get("extract.lookback")
        if lookback and not keys:
            raise ConfigError("extract.lookback needs extract.primary.key.fields to recognise delivered rows")
        return {
            "full": full,
            "delta": _ident(delta[0], "extract.delta.fields") if delta else None,
            "keys": keys,
            "lookback": lookback,
            "partition": self.props.get("source.jdbc.partition.column") or (keys[0] if keys else None),
            "ranges": max(1, self.props.get_int("source.jdbc.ranges", 1) or 1),
        }

    def _table_schema(self, table: str) -> T.StructType:
        try:
            return self._read(f"(SELECT * FROM {table} WHERE 1=0) AS fp_schema").schema  # noqa: S608 - _ident
        except Exception as exc:  # the root cause, e.g. the driver class missing from the classpath
            raise PipelineError(
                f"source.jdbc.tables: cannot read table '{table}': {root_cause(exc)[:300]}"
            ) from exc

    def _wide_decimals(self, table: str, schema: T.StructType) -> set[str]:
        """The decimal columns of ``table`` wider than Spark's 38 digits, asked of the catalog
        only when Spark's schema leaves it open (:func:`portal.pipeline.sources.jdbc_types.capped`)."""
        query = jdbc_types.precision_query(table, self.dialect) if jdbc_types.capped(schema) else None
        if query is None:
            return set()
        rows = self._read(f"({query}) AS fp_precision", customSchema="c STRING, p INT").collect()
        return {str(r["c"]) for r in rows}

    def _stats(self, query: str, with_watermark: bool) -> dict[str, Any]:
        """The one row of a planning query.  PostgreSQL is asked directly: a Spark job for one row costs
        150-200 ms on a 2-core machine, as much as extracting a small increment, where a connection
        costs ~10 ms.  The session is set as the JDBC driver sets it (the JVM's time zone, ISO dates), so
        the watermark's text is the one the extraction's JDBC queries compare against."""
        uri = None
        if self.dialect.name == "postgresql":
            uri = arrow_pg.libpq_uri(
                self.props.require("source.jdbc.url"),
                self.props.get("source.conn.username"),
                self.props.get("source.conn.password"),
            )
        if uri is None:  # SQLite says NUMERIC for a text cast: read the watermark as text
            as_text = {"customSchema": "wm_min STRING, wm_max STRING"} if with_watermark else {}
            row = self._read(
                f"({cancelling.tagged(query, self.statement_tag)}) AS fp_stats", **as_text
            ).first()
            return row.asDict() if row else {}
        with psycopg.connect(uri, autocommit=True) as conn, conn.cursor() as cur:
            landing.check(conn, self.what, portal=self.portal(), bounds=self.bounds())
            arrow_pg.set_jdbc_session(cur, arrow_pg.jvm_zone(self.spark))
            cur.execute(cancelling.tagged(query, self.statement_tag))  # built from validated identifiers
            found = cur.fetchone()
            names = [d.name for d in cur.description or []]
        return dict(zip(names, found, strict=True)) if found else {}

    def get_work_units(self) -> list[WorkUnit]:
        self.landed()
        settings = self._settings()
        entries = self.props.get_list(jdbc_tables.TABLES_KEY)
        if not entries:
            raise ConfigError("missing required property 'source.jdbc.tables'")
        units: list[WorkUnit] = []
        for table in self._tables(entries):
            if not self.wanted(table):
                continue
            try:
                units.extend(self._plan_table(_ident(table, "source.jdbc.tables"), settings))
            except PipelineError as exc:
                units.append(WorkUnit(table, self.previous_watermark(table), None, error=str(exc)))
        return units

    def _tables(self, entries: list[str]) -> list[str]:
        """The tables this run reads: names as written, patterns matched against the catalog now
        (:mod:`portal.pipeline.sources.jdbc_tables`)."""
        exclude = self.props.get_list(jdbc_tables.EXCLUDE_KEY)
        if not jdbc_tables.has_patterns(entries):
            return jdbc_tables.resolve(entries, [], exclude)
        query = jdbc_tables.catalog_query(self.dialect.name)
        try:
            rows = self._read(f"({query}) AS fp_catalog", customSchema="s STRING, t STRING, d INT").collect()
        except Exception as exc:
            raise PipelineError(
                f"source.jdbc.tables: cannot list the tables to match {entries}: {root_cause(exc)[:300]}"
            ) from exc
        catalog = [jdbc_tables.Table(r["s"] or "", r["t"], bool(r["d"])) for r in rows]
        return jdbc_tables.resolve(entries, catalog, exclude, self.dialect.name)

    def _plan_table(self, table: str, s: dict[str, Any]) -> list[WorkUnit]:  # noqa: C901
        schema = self._table_schema(table)
        fields = {f.name: f.dataType for f in schema.fields}
        low = self.previous_watermark(table)
        delta = s["delta"]
        if delta is not None and delta not in fields:
            raise ConfigError(
                f"watermark column '{delta}' (extract.delta.fields) does not exist in table '{table}' "
                f"(columns: {', '.join(fields)})"
            )
        if delta is not None and not isinstance(fields[delta], NUMERIC + TEMPORAL):
            raise ConfigError(f"watermark column '{delta}' of '{table}' must be numeric, date or timestamp")
        for key in s["keys"]:
            if key not in fields:
                raise ConfigError(
                    f"key column '{key}' (extract.primary.key.fields) does not exist in '{table}'"
                )
        part = s["partition"]
        if part is not None and (part not in fields or not isinstance(fields[part], NUMERIC)):
            raise ConfigError(f"partition column '{part}' of '{table}' must be an existing numeric column")
        select = []
        if delta:
            text = self.dialect.cast_text
            select += [f"{text(f'min({delta})')} AS wm_min", f"{text(f'max({delta})')} AS wm_max"]
        if part:
            select += [f"min({part}) AS k_min", f"max({part}) AS k_max"]
        info = self._stats(f"SELECT {', '.join(select) or '1 AS one'} FROM {table}", bool(delta))  # noqa: S608
        base = {"table": table, "k_min": info.get("k_min"), "k_max": info.get("k_max")}
        if info.get("k_min") is not None:
            base["k_min"], base["k_max"] = int(info["k_min"]), int(info["k_max"])
        kind = _Kind(fields[delta]) if delta else None
        backfill_high = self.backfill_high(table)
        if backfill_high is not None:
            return self._plan_backfill(table, s, kind, info, base, low, backfill_high, fields[delta])
        if s["full"]:
            high = info.get("wm_max") if delta else f"snapshot@{self.jobspec.execution_id}"
            return [WorkUnit(table, low, high, payload={**base, "full": True})]
        wm_max = info.get("wm_max")
        low_value = watermarks.value_of(low)
        assert kind is not None
        if wm_max is None or (low_value is not None and kind.parse(wm_max) <= kind.parse(low_value)):
            return [WorkUnit(table, low, low, empty=True, payload=base)]
        start = low_value if low_value is not None else info["wm_min"]
        bounds = kind.split(start, wm_max, s["ranges"]) or [wm_max]  # all rows share one value
        units = []
        previous: str | None = low
        lower: str | None = low_value
        for index, upper in enumerate(bounds):
            payload = {**base, "lower": lower, "upper": upper}
            if s["lookback"]:
                payload["window_start"] = kind.minus(upper, s["lookback"])
                if index == 0 and low_value is not None:
                    payload["read_lower"] = kind.minus(low_value, s["lookback"])
                    payload["seen"] = watermarks.seen_of(low)
            units.append(WorkUnit(table, previous, upper, index, len(bounds), payload=payload))
            previous, lower = upper, upper
        return units

    def _plan_backfill(
        self,
        table: str,
        s: dict[str, Any],
        kind: _Kind | None,
        info: dict[str, Any],
        base: dict[str, Any],
        low: str | None,
        high: str,
        dtype: T.DataType,
    ) -> list[WorkUnit]:
        """Work units of ``(low, min(high, column max)]``; see the module docstring."""
        where = f"backfill ['{table}']"
        if s["full"] or kind is None:
            raise ConfigError(
                f"{where}: extract.is.full=true reads the whole table every run; only an incremental "
                "table (extract.delta.fields) can be backfilled"
            )
        values = {}
        for name, text in (("low", low), ("high", high)):
            if text is None:
                continue
            try:
                values[name] = kind.parse(text)
            except (ValueError, ArithmeticError):
                raise ConfigError(
                    f"{where}: {name} '{text}' is not a {dtype.simpleString()} value of column '{s['delta']}'"
                ) from None
        if low is not None and values["low"] >= values["high"]:
            raise ConfigError(f"{where}: low '{low}' is not below high '{high}'")
        wm_max, wm_min = info.get("wm_max"), info.get("wm_min")
        payload = {**base, "backfill": True}
        if wm_max is None or wm_min is None:  # an empty column has neither
            return [WorkUnit(table, low, low, empty=True, payload=payload)]
        upper = wm_max if kind.parse(wm_max) <= values["high"] else kind.format(values["high"])
        if low is not None:  # the column's own form: '... 05:00:00+00:00' on a timestamptz column
            low = kind.format(values["low"])
        start = low if low is not None else wm_min
        if kind.parse(upper) < kind.parse(wm_min) or (low is not None and kind.parse(upper) <= values["low"]):
            return [WorkUnit(table, low, low, empty=True, payload=payload)]
        bounds = kind.split(start, upper, s["ranges"]) or [upper]
        units = []
        previous: str | None = low
        for index, bound in enumerate(bounds):
            unit_payload = {**payload, "lower": previous, "upper": bound}
            units.append(WorkUnit(table, previous, bound, index, len(bounds), payload=unit_payload))
            previous = bound
        return units

    def extract(self, work_unit: WorkUnit) -> Extraction:
        self.landed()
        s = self._settings()
        p = work_unit.payload
        if p.get("backfill"):
            s["lookback"] = None  # an explicit range: no look-back window, no seen-set
        table, delta = p["table"], s["delta"]
        where = []
        extra_cols = ""
        quote = self.dialect.literal
        if not p.get("full"):
            lower = p.get("read_lower", p.get("lower"))
            if lower is not None:
                where.append(f"{delta} > {quote(lower)}")
            where.append(f"{delta} <= {quote(p['upper'])}")
            if s["lookback"]:
                extra_cols = (
                    f", {self.dialect.cast_text(delta)} AS fp_wm_text,"
                    f" CASE WHEN {delta} > {quote(p['window_start'])} THEN 1 ELSE 0 END AS fp_in_window"
                )
        condition = " WHERE " + " AND ".join(where) if where else ""
        # identifiers validated by _ident, values quoted by the dialect
        select = f"SELECT t.*{extra_cols} FROM {table} t{condition}"  # noqa: S608
        query = f"({cancelling.tagged(select, self.statement_tag)}) AS fp_wu"
        reader = self.spark.read.format("jdbc").options(**self._options()).option("dbtable", query)
        slices, split_on = None, None
        if s["partition"] and p.get("k_min") is not None and _LONG[0] <= p["k_min"] < p["k_max"] < _LONG[1]:
            split_on = s["partition"]
            parts = (
                self.props.get_int("source.jdbc.num.partitions") or self.spark.sparkContext.defaultParallelism
            )
            slices = arrow_pg.Slices(s["partition"], p["k_min"], p["k_max"] + 1, parts)
            reader = reader.options(
                partitionColumn=s["partition"],
                lowerBound=str(p["k_min"]),
                upperBound=str(p["k_max"] + 1),
                numPartitions=str(parts),
            )
        jdbc = reader.load()
        compared = {delta, *s["keys"], s["partition"]} - {None}
        recorded = self.jobspec.previous_schemas.get(work_unit.dataset_urn)
        earlier = T.StructType.fromJson(json.loads(recorded)) if recorded else None
        wide = self._wide_decimals(table, jdbc.schema)
        zone = arrow_pg.jvm_zone(self.spark)
        read = jdbc_types.reading(jdbc.schema, self.dialect, compared, earlier, wide, split_on, zone)
        if read.custom_schema or read.texts:  # Spark's mapping would change a value: read them as they are
            reread = reader.option("dbtable", read.query(query, jdbc.columns, self.dialect))
            jdbc = (
                reread.option("customSchema", read.custom_schema) if read.custom_schema else reread
            ).load()
        jdbc = read.keep(jdbc)
        # A judged login's (a user-made node's, a flow's own) Arrow connections must land where the
        # probe of landed() proved it: the same server, database, user and password.
        scan = arrow_pg.scan_for(
            jdbc,
            self.props,
            query,
            slices,
            portal=self.portal(),
            what=self.what,
            proved=self.landed() if self.bounds() is not None else None,
        )
        df = scan.frame(self.spark) if scan and arrow_pg.frames_too(self.props) else jdbc
        if p.get("full") or not s["lookback"]:
            return Extraction(df, stage=True, arrow=scan)
        hashed = df.withColumn("fp_hash", F.xxhash64(*[F.col(k) for k in s["keys"]], F.col("fp_wm_text")))
        seen = [int(h) for h in p.get("seen", [])]
        keep = ~F.col("fp_hash").isin(seen) if seen else None
        limit = self.props.get_int("extract.lookback.max.keys", 100_000) or 100_000
        upper = p["upper"]

        def finish(metrics: dict[str, Any]) -> str | None:
            window = metrics.get("fp_seen") or []
            if len(window) > limit:
                raise PipelineError(
                    f"extract.lookback window of '{table}' holds {len(window)} rows, more than "
                    f"extract.lookback.max.keys={limit}; shorten extract.lookback"
                )
            return watermarks.make(upper, window)

        return Extraction(
            hashed,
            metrics={"fp_seen": F.collect_set(F.when(F.col("fp_in_window") == 1, F.col("fp_hash")))},
            keep=keep,
            helper_columns=["fp_hash", "fp_wm_text", "fp_in_window"],
            finish=finish,
            stage=True,
        )
