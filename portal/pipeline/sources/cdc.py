"""Change data capture from PostgreSQL's log (logical replication with ``pgoutput``) or a MariaDB
binary log (:mod:`portal.pipeline.cdc.mysql`, chosen by the node's URL).

Name it in ``source.class`` (``portal.pipeline.sources.cdc.CdcSource``) on a flow whose source is a
PostgreSQL or MariaDB JDBC node, and list the tables in ``source.cdc.tables`` (``schema.table``; on
MariaDB ``database.table`` in the node's database; one dataset per table). PostgreSQL needs
``wal_level=logical``, the user the REPLICATION attribute and the right to publish the tables; the
MariaDB path is described in its module, and below everything said of PostgreSQL's log position holds
for a binlog position (``file:offset``), minus the slot.

The flow's slot and publication (:mod:`portal.pipeline.cdc.pg`) are created on the first run. A table
without a position (the first run, a table added later, or ``source.cdc.resnapshot=true``) is first
snapshotted (op ``r``): with a primary key, in key-ordered chunks over as many runs as it takes
while its changes keep flowing (:mod:`portal.pipeline.cdc.snapshot`, which says how chunk and stream
meet exactly); without one, read whole in a REPEATABLE READ transaction taken after the slot exists,
the changes of the transactions that snapshot already sees skipped. Later runs deliver the changes (ops ``c``, ``u``, ``d``) of transactions committed after the table's
position, up to the log's flushed position when the run is planned (``source.cdc.max.changes``
bounds one run; the rest waits for the next).

Each row carries the table's columns and ``_cdc_op``, ``_cdc_position`` (the commit's end position
and the change's place in its transaction, ``%016X:%08d``: text that sorts in log order; a chunk's
rows are numbered at its high watermark, ``%016X:S%012d``, a key-less table's whole read from
position 0, before every change),
``_cdc_commit_time`` and ``_cdc_deleted``. An update that moves a row to another key comes as a
delete of the old key followed by the new row, both in the update's place. A JDBC destination applies them by key with
``writer.write.mode=merge`` on ``extract.primary.key.fields``, ``extract.delta.fields=_cdc_position``
and ``writer.merge.delete.column=_cdc_deleted``; a files destination keeps them as a change log.

Exactly once: the table's watermark is the log position (``X/X``), committed with the data by the
commit steps. The slot is never moved by reading (peek); at the start of a run it is advanced to the
lowest position every table of the flow committed, so the server frees the log before it, and a run
that died before its commit reads the same changes again while a committed one never does.
A slot lost on the server (``max_slot_wal_keep_size``) or missing while the tables have positions
fails the run saying so; ``source.cdc.resnapshot=true`` starts over from a new snapshot.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import functions as F
from pyspark.sql import types as T

from portal.pipeline import fs, landing, usernode
from portal.pipeline.cdc import fanout as cdc_fanout
from portal.pipeline.cdc import mysql as cdc_mysql
from portal.pipeline.cdc import mysql_values
from portal.pipeline.cdc import pg as cdc_pg
from portal.pipeline.cdc import snapshot as cdc_snapshot
from portal.pipeline.cdc.pg import ASK_RESNAPSHOT
from portal.pipeline.cdc.pgoutput import DELETE, format_lsn
from portal.pipeline.cdc.pgoutput_batch import BatchDecoder, Decoded
from portal.pipeline.dialects import MYSQL, POSTGRESQL, dialect_for
from portal.pipeline.errors import ConfigError, PipelineError
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.sources.base import SQL_TYPE, Extraction, Source, TextScan
from portal.pipeline.workunits import WorkUnit

TABLES_KEY = "source.cdc.tables"
CDC_SOURCE_CLASS = "portal.pipeline.sources.cdc.CdcSource"
OP, POSITION, COMMIT_TIME, DELETED = "_cdc_op", "_cdc_position", "_cdc_commit_time", "_cdc_deleted"
SNAPSHOT = "r"
_META = pa.schema(
    [
        (OP, pa.string()),
        (POSITION, pa.string()),
        (COMMIT_TIME, pa.timestamp("us", tz="UTC")),
        (DELETED, pa.bool_()),
    ]
)
_TYPES: dict[int, T.DataType] = {
    16: T.BooleanType(),
    17: T.BinaryType(),  # staged as the server's hex text, unhexed on extract
    20: T.LongType(),
    21: T.ShortType(),
    23: T.IntegerType(),
    700: T.FloatType(),
    701: T.DoubleType(),
    1082: T.DateType(),
    1114: T.TimestampNTZType(),  # without a time zone: kept naive (a wall time, not an instant)
    1184: T.TimestampType(),
}
# Built-in types have ids below PostgreSQL's first object id of a database's own (FirstNormalObjectId):
# a user's enum or domain is not known in another database, and arrives as text.
_BUILT_IN = 16384


def spark_type(type_oid: int, typmod: int) -> T.DataType:
    """The Spark type a column's text value is cast to (text for the types not listed)."""
    if type_oid == 1700:  # numeric(p, s); unconstrained numeric as Spark's widest decimal
        precision = ((typmod - 4) >> 16) & 0xFFFF
        if typmod >= 4 and precision > 38:
            return T.StringType()  # wider than Spark's decimals: the server's text, every digit
        if typmod >= 4:
            return T.DecimalType(precision, (typmod - 4) & 0xFFFF)
        return T.DecimalType(38, 18)
    return _TYPES.get(type_oid, T.StringType())


# The built-in types kept in a PostgreSQL destination (arrays of them too): those with an equality
# operator, which a merge's history compares by (json, point, xml have none: they arrive as text).
_KEPT = {
    "jsonb", "uuid", "time without time zone", "time with time zone", "interval", "character varying",
    "character", "text", "numeric", "inet", "cidr", "macaddr", "macaddr8", "bit", "bit varying",
    "smallint", "integer", "bigint", "real", "double precision", "boolean", "date",
    "timestamp without time zone", "timestamp with time zone", "bytea", "money", "oid",
}  # fmt: skip


def kept_sql_type(type_oid: int, typmod: int, sql_type: str) -> str | None:
    """The source's own column type where Spark has none that holds it (jsonb, uuid, time,
    interval, arrays, varchar(n), a numeric unconstrained or wider than Spark's 38 digits): a PostgreSQL
    destination takes the server's text into a column of that type, exactly. None: Spark's type."""
    if type_oid >= _BUILT_IN:
        return None
    if type_oid == 1700 and typmod < 4:
        return "numeric"
    base = re.sub(r"\(.*?\)", "", sql_type).removesuffix("[]").strip()
    if sql_type == "text" or base not in _KEPT or not isinstance(spark_type(type_oid, typmod), T.StringType):
        return None  # text: Spark's own string
    return sql_type


def staged_column(name: str, kind: str, staged: T.DataType, sql_type: str | None = None) -> Any:
    """A staged column as the extract has it: text cast to ``kind``; PostgreSQL's hex text of a
    bytea (``\\x00ff``) as its bytes; a column whose source type Spark has not keeps it in its
    metadata (:func:`kept_sql_type`)."""
    column = F.col(name)
    if kind == "binary" and isinstance(staged, T.StringType):
        column = F.unhex(F.substring(column, 3, 1 << 30))
    else:
        column = column.cast(kind)
    return column.alias(name, metadata={SQL_TYPE: sql_type} if sql_type else {})


def position(end_lsn: int, index: int) -> str:
    return f"{end_lsn:016X}:{index:08d}"


def acknowledge(jobspec: dict[str, Any] | JobSpec, committed: Mapping[str, str | None]) -> bool:
    """Release the slot's log up to what every captured table has now committed: called by the
    worker right after the publish's commit steps are done (``committed``: the watermarks this
    run checked in; the other tables keep their previous ones). True when the slot moved.

    The watermark stays the truth: a crash before this call leaves the slot behind, and the next
    run both skips what its positions cover and advances the slot at its start, so nothing is read
    twice into the destination and nothing is lost. A MariaDB binlog has no slot: nothing to do."""
    spec = JobSpec.from_dict(jobspec)
    props = spec.props
    url = props.get("source.jdbc.url") or ""
    if props.get("source.class") != CDC_SOURCE_CLASS or not url.startswith("jdbc:postgresql:"):
        return False
    if spec.is_backfill:
        return False
    tables = list(dict.fromkeys(props.get_list(TABLES_KEY)))
    marks = {t: committed.get(t) or spec.previous_watermarks.get(t) for t in tables}
    # The lowest over every destination's tables (snapshot progress left out); None while one has
    # no position yet.
    point = cdc_fanout.release_point(spec, marks, tables)
    if point is None:
        return False
    with cdc_pg.connect(
        url,
        props.get("source.conn.username"),
        props.get("source.conn.password"),
        what=landing.node_what(spec.extra, "source", "source.jdbc.url"),
        portal=landing.portal_databases(spec.extra),
        timeout=30,
        bounds=usernode.from_spec(spec.extra, "source"),
    ) as conn:
        slot = cdc_pg.slot_name(spec.flow_id, spec.flow_group, spec.flow_name)
        cdc_fanout.hold(conn, slot)
        return cdc_pg.advance(conn, slot, point)


class _Table:
    """One table's plan and its staged rows (text values, as the log sends them)."""

    def __init__(
        self, name: str, cols: Sequence[tuple[str, ...]], path: str, since: Any, *, raw_bytes: bool = False
    ) -> None:
        self.name, self.cols, self.path, self.since = name, cols, path, since
        self.names = [c[0] for c in cols]
        # Text as the log sends it, cast to the column's type on extract; with ``raw_bytes`` (the
        # binlog's) binary columns as their bytes.
        schema = pa.schema(
            [(c[0], pa.binary() if raw_bytes and c[1] == "binary" else pa.string()) for c in cols]
            + list(_META)
        )
        self.writer = pq.ParquetWriter(path, schema)
        self.snapshot: cdc_pg.Snapshot | None = None
        self.chunks: cdc_snapshot.Staged | None = None  # a chunked snapshot under way
        self.rows = 0
        self.error: str | None = None

    def write(
        self, rows: list[tuple[Any, ...]], meta: list[tuple[str, str, dt.datetime | None, bool]]
    ) -> None:
        if not rows:
            return
        schema = self.writer.schema
        arrays = [
            cdc_snapshot.staged_array([r[i] for r in rows], schema.field(i).type)
            for i in range(len(self.names))
        ]
        arrays += [pa.array([m[i] for m in meta], f.type) for i, f in enumerate(_META)]
        self.write_arrays(arrays)

    def write_arrays(self, arrays: list[pa.Array]) -> None:
        """Stage rows given as columns: the table's, then ``_META``'s."""
        if len(arrays[0]):
            self.writer.write_table(pa.Table.from_arrays(arrays, schema=self.writer.schema))
            self.rows += len(arrays[0])

    def chunked(self, progress: cdc_snapshot.Progress, key: list[str]) -> cdc_snapshot.Staged:
        """Start (or go on with) the table's snapshot in key chunks, staged beside its changes."""
        where = [self.names.index(k) for k in key]
        self.chunks = cdc_snapshot.Staged(
            self.path.replace(".parquet", ".chunks.parquet"), self.writer.schema, where, progress
        )
        return self.chunks

    def finish_chunks(self) -> None:
        """Add the chunk rows the log did not show newer to the table's rows."""
        if self.chunks is not None:
            for batch in self.chunks.rows_kept():
                self.writer.write_batch(batch)
                self.rows += batch.num_rows

    def watermark(self, position: str) -> str:
        return position if self.chunks is None else self.chunks.watermark(position)

    def wants(self, xid: int, end_lsn: int) -> bool:
        if self.snapshot is not None:
            return not self.snapshot.sees(xid)
        return self.since is None or end_lsn > self.since


class CdcSource(Source):
    """See the module docstring."""

    @property
    def what(self) -> str:
        return landing.node_what(self.jobspec.extra, "source", "source.jdbc.url")

    def _connect(self) -> Any:
        return cdc_pg.connect(
            self.props.require("source.jdbc.url"),
            self.props.get("source.conn.username"),
            self.props.get("source.conn.password"),
            what=self.what,
            portal=landing.portal_databases(self.jobspec.extra),
            bounds=usernode.from_spec(self.jobspec.extra, "source"),
        )

    def _tables(self) -> list[str]:
        tables = self.props.get_list(TABLES_KEY)
        if not tables:
            raise ConfigError(
                f"missing required property '{TABLES_KEY}' (the tables to capture, schema.table)"
            )
        if problems := cdc_pg.table_problems(tables, self.props.describe(TABLES_KEY)):
            raise ConfigError(problems[0])
        return list(dict.fromkeys(tables))

    @property
    def slot(self) -> str:
        spec = self.jobspec
        return cdc_pg.slot_name(spec.flow_id, spec.flow_group, spec.flow_name)

    def _stage_dir(self) -> str:
        folder = fs.join(
            self.context.work_dir, "extract", self.jobspec.job_name, str(self.jobspec.execution_id), "cdc"
        )
        if "://" in folder and not folder.startswith("file:"):
            raise ConfigError("change data capture stages its rows in a local job work dir")
        os.makedirs(folder.removeprefix("file:"), exist_ok=True)
        return folder.removeprefix("file:")

    def get_work_units(self) -> list[WorkUnit]:  # noqa: C901
        if self.jobspec.is_backfill:
            raise ConfigError("a CDC flow cannot be backfilled: its watermark is a log position")
        tables = self._tables()
        resnapshot = self.props.get_bool("source.cdc.resnapshot", False)
        stored = {t: (None if resnapshot else self.previous_watermark(t)) for t in tables}
        progress = self._progress(stored)
        if dialect_for(self.props.require("source.jdbc.url")) is MYSQL:
            return self._plan_mariadb(tables, stored, progress)
        since = cdc_pg.positions({t: cdc_snapshot.stream_position(m) for t, m in stored.items()})
        limit = self.props.get_int("source.cdc.max.changes") or None
        with self._connect() as conn:
            cdc_fanout.hold(conn, self.slot)  # the other destinations' jobs use the slot too
            found = cdc_pg.state(conn, self.slot)
            if found is not None and found.wal_status == "lost" and since:
                raise PipelineError(
                    f"{self.what}: replication slot {self.slot} was lost on the server (the log it "
                    f"needed was removed, max_slot_wal_keep_size); nothing was read. {ASK_RESNAPSHOT}"
                )
            if found is None and since:
                raise PipelineError(
                    f"{self.what}: replication slot {self.slot} is missing while the tables have "
                    f"positions (dropped on the server?); nothing was read. {ASK_RESNAPSHOT}"
                )
            # A lost slot is dropped only once no table has a position left (a new snapshot was asked for).
            # Another destination reading on from the slot keeps it (a new snapshot needs none).
            kept = cdc_fanout.others_hold_positions(self.jobspec)
            if found is not None and ((resnapshot and not kept) or found.wal_status == "lost"):
                cdc_pg.drop(conn, self.slot)
            cdc_pg.ensure(conn, self.slot, tables, self.what)
            point = cdc_fanout.release_point(self.jobspec, stored, tables)
            if point is not None:  # release the log every table of every destination committed
                cdc_pg.advance(conn, self.slot, point)
            folder = self._stage_dir()
            staged: dict[str, _Table] = {}
            for index, table in enumerate(tables):
                cols = cdc_pg.columns(conn, table)
                if not cols:
                    raise ConfigError(f"{TABLES_KEY}: table '{table}' does not exist in {self.what}")
                typed = [
                    (c[0], spark_type(c[1], c[2]).simpleString(), kept_sql_type(c[1], c[2], c[4]) or "")
                    for c in cols
                ]
                staged[table] = _Table(
                    table, typed, os.path.join(folder, f"t{index}.parquet"), since.get(table)
                )
            try:
                whole = self._chunk_pg(conn, staged, progress)
                upto = max(self._snapshot(conn, whole), cdc_pg.flushed(conn))
                # A snapshot's run reads on to its point: a transaction it does not see may end before
                # it; a chunk's run reads its whole window.
                reading = whole or any(t.chunks for t in staged.values())
                upto = self._changes(conn, staged, upto, None if reading else limit)
                for t in staged.values():
                    t.finish_chunks()
            finally:
                for t in staged.values():
                    t.writer.close()
        return self._units(tables, staged, stored, lambda t: t.watermark(format_lsn(max(upto, t.since or 0))))

    def _progress(self, stored: dict[str, str | None]) -> dict[str, cdc_snapshot.Progress | None]:
        """The tables' chunked snapshots under way (None: not snapshotting, or not yet begun)."""
        found = {}
        for table, mark in stored.items():
            try:
                found[table] = cdc_snapshot.split(mark)[1]
            except ValueError as error:
                raise PipelineError(f"{table}: {error}. {ASK_RESNAPSHOT}") from None
        return found

    @staticmethod
    def _keyless(t: _Table, progress: cdc_snapshot.Progress | None, whole: list[_Table]) -> None:
        """A table without a primary key: read whole when it has no position; a chunked snapshot
        whose table lost its key meanwhile cannot go on."""
        if progress is not None:
            t.error = (
                f"{t.name} has no primary key any more, and its snapshot in key chunks was under way "
                f"(after key {list(progress.after or [])}). {ASK_RESNAPSHOT}"
            )
        elif t.since is None:
            whole.append(t)

    def _chunk_pg(
        self, conn: Any, staged: dict[str, _Table], progress: dict[str, cdc_snapshot.Progress | None]
    ) -> list[_Table]:
        """Read this run's key chunks of the tables whose snapshot is due
        (:mod:`~portal.pipeline.cdc.snapshot`); the tables without a primary key and without a
        position, to be read whole."""
        size, per_run = cdc_snapshot.size_settings(self.props)
        start = cdc_pg.flushed(conn)  # a new snapshot's stream begins before its first chunk
        whole: list[_Table] = []
        for t in staged.values():
            if t.since is not None and progress[t.name] is None:
                continue
            key = cdc_snapshot.pg_key(conn, t.name)
            if not key:
                self._keyless(t, progress[t.name], whole)
                continue
            if t.since is None:
                t.since = start
            chunks = t.chunked(progress[t.name] or cdc_snapshot.Progress(), [k for k, _ in key])
            for _ in range(per_run):
                chunks.add(
                    cdc_snapshot.pg_chunk(conn, t.name, t.names, key, chunks.progress.after, size), SNAPSHOT
                )
                if chunks.done:
                    break
        return whole

    def _plan_mariadb(  # noqa: C901, PLR0915
        self,
        tables: list[str],
        stored: dict[str, str | None],
        progress: dict[str, cdc_snapshot.Progress | None],
    ) -> list[WorkUnit]:
        """The binlog path (:mod:`portal.pipeline.cdc.mysql`): no slot; a snapshot's position is the
        one MariaDB gives for it, and changes are read from the lowest committed position."""
        server = cdc_mysql.server_of(
            self.props.require("source.jdbc.url"),
            self.props.get("source.conn.username"),
            self.props.get("source.conn.password"),
        )
        since: dict[str, cdc_mysql.Position] = {}
        for table, mark in stored.items():
            if text := cdc_snapshot.stream_position(mark):
                try:
                    since[table] = cdc_mysql.parse_position(text)
                except ValueError as error:
                    raise PipelineError(f"{table}: {error}. {ASK_RESNAPSHOT}") from None
        portal = landing.portal_databases(self.jobspec.extra)
        conn = cdc_mysql.connect(
            server,
            tables,
            what=self.what,
            portal=portal,
            bounds=usernode.from_spec(self.jobspec.extra, "source"),
        )
        folder = self._stage_dir()
        staged: dict[str, _Table] = {}
        try:
            cdc_mysql.check_server(conn, self.what)
            lost = sorted({p.file for p in since.values() if not cdc_mysql.available(conn, p)})  # type: ignore[union-attr]
            if lost:
                raise PipelineError(
                    f"{self.what}: the server no longer has binlog {', '.join(lost)} where the flow's position "
                    f"lies (expired); nothing was read. {ASK_RESNAPSHOT}"
                )
            upto = cdc_mysql.current(conn)
            gtids = isinstance(upto, cdc_mysql.Gtids)
            if gtids:  # positions kept as file offsets carry on in GTIDs
                since = {table: cdc_mysql.in_gtids(conn, p) for table, p in since.items()}
            for index, table in enumerate(tables):
                cols = mysql_values.columns(conn, table)
                if not cols:
                    raise ConfigError(f"{TABLES_KEY}: table '{table}' does not exist in {self.what}")
                staged[table] = _Table(
                    table, cols, os.path.join(folder, f"t{index}.parquet"), since.get(table), raw_bytes=True
                )
            fresh = self._chunk_mariadb(conn, staged, progress, gtids)
            if fresh:
                batches = cdc_mysql.snapshot(conn, [(t.name, t.names) for t in fresh], gtids=gtids)
                point = next(batches)
                for t in fresh:
                    t.since = point
                at = point.sort_text()
                for name, rows in batches:
                    t = staged[name]
                    t.write(
                        rows, [(SNAPSHOT, f"{at}:{t.rows + i:08d}", None, False) for i in range(len(rows))]
                    )
                upto = upto.later(point) if type(upto) is type(point) else point  # type: ignore[arg-type]
            if any(t.chunks for t in staged.values()):  # read on past the chunks' windows
                now = cdc_mysql.current(conn)
                upto = upto.later(now) if type(upto) is type(now) else upto  # type: ignore[arg-type]
            marks = [t.since for t in staged.values()]
            if any(type(m) is not type(upto) for m in marks):
                raise PipelineError(
                    f"{self.what}: the tables' positions are of different kinds ({', '.join(m.text() for m in marks)}); "
                    f"the binlog cannot be read from one place. {ASK_RESNAPSHOT}"
                )
            start = marks[0]
            for mark in marks[1:]:
                start = start.earlier(mark)
            # Written in batches: a Parquet row group per change costs kilobytes and a slow read.
            pending: dict[str, tuple[list[tuple[Any, ...]], list[Any]]] = {}
            keys = {t: cdc_snapshot.mariadb_key(conn, t) for t in tables}  # an update may move a key
            uuids = {t: mysql_values.uuids(conn, t) for t in tables}
            for change in cdc_mysql.changes(server, self.slot, start, upto, tables, keys):
                t = staged[change.table]
                if t.since.covers(change.position):
                    continue
                row = tuple(
                    mysql_values.uuid_text(change.values.get(n))
                    if n in uuids[t.name]
                    else change.values.get(n)
                    for n in t.names
                )
                where = f"{change.position.text()}:{change.index:08d}"
                rows, meta = pending.setdefault(t.name, ([], []))
                rows.append(row)
                meta.append((change.op, where, change.commit_time, change.op == DELETE))
                if len(rows) >= 10_000:
                    t.write(*pending.pop(t.name))
                if t.chunks is not None:  # a newer change than the chunk row read of its key
                    t.chunks.saw(row, change.position)
            for name, (rows, meta) in pending.items():
                staged[name].write(rows, meta)
            for t in staged.values():
                t.finish_chunks()
        finally:
            conn.close()
            for t in staged.values():
                t.writer.close()
        return self._units(tables, staged, stored, lambda t: t.watermark(upto.later(t.since).text()))

    def _chunk_mariadb(
        self,
        conn: Any,
        staged: dict[str, _Table],
        progress: dict[str, cdc_snapshot.Progress | None],
        gtids: bool,
    ) -> list[_Table]:
        """Read this run's key chunks of the tables whose snapshot is due; a new snapshot's stream
        begins at its first chunk's position. The tables without a primary key and without a
        position, to be read whole."""
        size, per_run = cdc_snapshot.size_settings(self.props)
        whole: list[_Table] = []
        for t in staged.values():
            if t.since is not None and progress[t.name] is None:
                continue
            key = cdc_snapshot.mariadb_key(conn, t.name)
            if not key:
                self._keyless(t, progress[t.name], whole)
                continue
            chunks = t.chunked(progress[t.name] or cdc_snapshot.Progress(), key)
            for _ in range(per_run):
                chunk, low = cdc_snapshot.mariadb_chunk(
                    conn, t.name, t.names, key, chunks.progress.after, size, gtids=gtids
                )
                if t.since is None:
                    t.since = low
                chunks.add(chunk, SNAPSHOT)
                if chunks.done:
                    break
        return whole

    def _units(
        self,
        tables: list[str],
        staged: dict[str, _Table],
        stored: dict[str, str | None],
        high_of: Callable[[_Table], str],
    ) -> list[WorkUnit]:
        """One work unit per table: its staged rows, up to the position it reached (never behind
        what the table committed)."""
        units = []
        for table in tables:
            t, low = staged[table], stored[table]
            high = high_of(t)
            if t.error:
                units.append(WorkUnit(table, low, None, error=t.error))
            elif low == high:
                units.append(WorkUnit(table, low, low, empty=True))
            else:
                payload = {"path": t.path, "columns": [list(c) for c in t.cols]}
                units.append(
                    WorkUnit(table, low, high, estimated_bytes=os.path.getsize(t.path), payload=payload)
                )
        return units

    def _snapshot(self, conn: Any, tables: list[_Table]) -> int:
        """Read the tables without a position whole, in one snapshot taken after the slot exists."""
        if not tables:
            return 0
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            snap, point = cdc_pg.snapshot_point(conn)
            for t in tables:
                t.snapshot = snap
                # Position 0: a change this snapshot does not see may end before its point, and must
                # still sort after the snapshot's rows (a merge keeps the latest by position).
                for rows in cdc_pg.read_text_rows(conn, t.name, t.names):
                    t.write(
                        rows, [(SNAPSHOT, position(0, t.rows + i), None, False) for i in range(len(rows))]
                    )
        return point

    def _changes(self, conn: Any, staged: dict[str, _Table], upto: int, limit: int | None) -> int:
        """Stage the changes after each table's position, up to ``upto``; the position the run reached.
        Messages are decoded a batch at a time into columns (:mod:`portal.pipeline.cdc.pgoutput_batch`).

        ``limit`` (``source.cdc.max.changes``) bounds the log read from the slot's position, which
        another destination of the flow may hold behind this one's: when every change read lies at
        or before the tables' positions, the slot is read again with twice the bound (the re-reads
        cost at most as much again as the last one), and a read stops once it staged ``limit`` new
        rows, so this destination goes on, about ``limit`` changes a run."""
        bound = limit
        while True:
            decoder, seen, last_end = BatchDecoder(), 0, 0
            rows, errors = sum(t.rows for t in staged.values()), [t.error for t in staged.values()]
            for messages in cdc_pg.peek_batches(conn, self.slot, upto, bound):
                seen += len(messages)
                done = decoder.feed(messages)
                if done.committed:
                    last_end = max(last_end, max(c.end_lsn for c in done.committed))
                    _stage(staged, done)
                if limit is not None and sum(t.rows for t in staged.values()) - rows >= limit:
                    return last_end  # whole transactions: the next run goes on from here
            if bound is None or seen < bound:
                return max(upto, last_end)
            if sum(t.rows for t in staged.values()) > rows or [t.error for t in staged.values()] != errors:
                return last_end  # stopped early with something new: the next run goes on from here
            bound *= 2

    def extract(self, work_unit: WorkUnit) -> Extraction:
        p = work_unit.payload
        df = self.spark.read.parquet(p["path"])
        staged = df.schema
        picked = [
            staged_column(c[0], c[1], staged[c[0]].dataType, c[2] if len(c) > 2 else None)
            for c in p["columns"]
        ]
        picked += [F.col(OP), F.col(POSITION), F.col(COMMIT_TIME), F.col(DELETED)]
        df = df.select(*picked)
        text = None
        if dialect_for(self.props.require("source.jdbc.url"), "source.jdbc.url") is POSTGRESQL:
            # The values are PostgreSQL's own text: a PostgreSQL destination copies them as they are.
            text = TextScan("postgresql", [p["path"]], df.columns, df.schema)
        return Extraction(df, text=text)


def _stage(staged: dict[str, _Table], done: Decoded) -> None:
    """Stage the rows of a batch's committed transactions that their table wants (each table skips
    what its position or snapshot already holds), with their meta columns computed in Arrow."""
    first = done.committed[0].seq
    wanted = {
        name: np.array([t.wants(c.xid, c.end_lsn) for c in done.committed], bool)
        for name, t in staged.items()
    }
    at = {c.seq: c for c in done.committed}
    for seq, relation in done.truncated:
        t = staged.get(relation.qualified)
        if t is not None and not t.error and wanted[t.name][seq - first]:
            t.error = (
                f"{t.name} was truncated on the server (at {format_lsn(at[seq].end_lsn)}); a truncate "
                f"cannot be applied as row changes. {ASK_RESNAPSHOT}"
            )
    prefixes = pa.array([f"{c.end_lsn:016X}:" for c in done.committed], pa.string())
    times = pa.array([c.commit_time for c in done.committed], _META.field(COMMIT_TIME).type)
    for rows in done.rows:
        t = staged.get(rows.relation.qualified)
        if t is None or t.error:
            continue
        txn = rows.seq - first
        keep = wanted[t.name][txn]
        if (rows.unchanged & keep).any():
            t.error = (
                f"{t.name}: an update did not send an unchanged large (TOAST) value; give the "
                "table REPLICA IDENTITY FULL so the log carries whole rows"
            )
            continue
        if not keep.any():
            continue
        picked = pa.array(np.flatnonzero(keep))
        txn_of = pa.array(txn).take(picked)
        by_name = {c.name: v for c, v in zip(rows.relation.columns, rows.values, strict=True)}
        arrays = [
            by_name[n].take(picked) if n in by_name else pa.nulls(len(picked), pa.string()) for n in t.names
        ]
        if t.chunks is not None:  # a newer change than the chunk row read of its key
            for row, i in zip(
                zip(*(a.to_pylist() for a in arrays), strict=True), txn_of.to_pylist(), strict=True
            ):
                t.chunks.saw(row, done.committed[i].end_lsn, done.committed[i].xid)
        op = rows.op.take(picked)
        index = pc.utf8_lpad(pc.cast(pa.array(rows.index).take(picked), pa.string()), 8, "0")
        arrays += [
            op,
            pc.binary_join_element_wise(prefixes.take(txn_of), index, ""),
            times.take(txn_of),
            pc.equal(op, DELETE),
        ]
        t.write_arrays(arrays)
