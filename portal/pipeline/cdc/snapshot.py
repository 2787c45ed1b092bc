"""A captured table's first read in chunks ordered by its primary key, while the log stream keeps its
position (the incremental snapshot of Debezium and Netflix's DBLog).

A table with a primary key is not read whole in one long transaction: each run reads at most
``source.cdc.snapshot.chunks.per.run`` chunks of ``source.cdc.snapshot.chunk.size`` rows, each in a
short transaction of its own, the next chunk starting after the last key read (``WHERE (key) >
(last) ORDER BY key LIMIT n``). Meanwhile the table's changes are delivered from its stream position
as for any captured table, and the slot is released up to it after each run: nothing holds the log.

Each chunk has a window of the log: its *low* watermark is what its read sees (on PostgreSQL the
transaction snapshot itself, exact where a log position read before it would race the commits in
flight; on MariaDB the binlog position ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` matches), its
*high* watermark the log position read right after the rows. A chunk row whose key has a change in
that window that the read did not see is dropped: the log's change is newer and carries the row (or
its delete). The rows kept are placed at the high watermark (``_cdc_position`` sorts after every
change the read saw and before every later one), so a merge by key keeps the latest value.

Progress is part of the table's watermark, committed with the data by the same commit steps:
``<stream position> snapshot {"after": [<last key, as text>], "rows": <rows so far>}``. A run that
dies before its commit reads the same chunks again; a committed one goes on after its last key. The
snapshot ends with the first chunk shorter than the chunk size, and the watermark is then the plain
stream position again. A table without a primary key cannot be chunked: it is read whole in one
consistent read, as before (see :mod:`portal.pipeline.sources.cdc`).

No Django here: the source (:mod:`portal.pipeline.sources.cdc`) plans the runs and the monitor
(:mod:`portal.monitoring.slots`) reads the stream position with :func:`stream_position`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from psycopg import sql

from portal.pipeline import pgconn
from portal.pipeline.cdc import mysql, mysql_values, pg

CHUNK_SIZE_KEY = "source.cdc.snapshot.chunk.size"
CHUNKS_PER_RUN_KEY = "source.cdc.snapshot.chunks.per.run"
DEFAULT_CHUNK_SIZE = 10_000
DEFAULT_CHUNKS_PER_RUN = 20
_MARK = " snapshot "

Key = tuple[str | bytes | None, ...]  # a binary key column (MariaDB) as its bytes


@dataclass(frozen=True)
class Progress:
    """How far a table's chunked snapshot got: the last key read (None before the first chunk)
    and how many rows it has read so far (numbering the next ones)."""

    after: Key | None = None
    rows: int = 0


def staged_array(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    """A staged column of ``kind``: binary columns as their bytes; a text column's bytes (a MariaDB
    BIT or GEOMETRY read by the SQL client) as the text they decode to, as before."""
    if pa.types.is_binary(kind):
        return pa.array(values, kind)
    return pa.array([v.decode(errors="replace") if isinstance(v, bytes) else v for v in values], kind)


def _key_json(value: Any) -> Any:
    return {"hex": value.hex()} if isinstance(value, bytes) else value


def _key_value(value: Any) -> Any:
    return bytes.fromhex(value["hex"]) if isinstance(value, dict) else value


def split(watermark: str | None) -> tuple[str | None, Progress | None]:
    """A table's watermark as its stream position and its snapshot's progress (None when the
    snapshot is done, or the watermark is a plain position)."""
    if not watermark:
        return None, None
    position, sep, rest = watermark.partition(_MARK)
    if not sep:
        return watermark, None
    try:
        found = json.loads(rest)
        after = found.get("after")
        last = None if after is None else tuple(_key_value(v) for v in after)
        return position, Progress(last, int(found.get("rows", 0)))
    except (ValueError, TypeError, AttributeError):
        raise ValueError(f"'{watermark[:80]}' is not a snapshot's progress") from None


def join(position: str, progress: Progress | None) -> str:
    """The watermark of a table at ``position`` whose snapshot is at ``progress`` (None: done)."""
    if progress is None:
        return position
    # A binary key's bytes as {"hex": ...}: JSON has no bytes.
    after = None if progress.after is None else [_key_json(v) for v in progress.after]
    return f"{position}{_MARK}{json.dumps({'after': after, 'rows': progress.rows}, separators=(',', ':'))}"


def stream_position(watermark: str | None) -> str | None:
    """The log position a table's watermark holds, snapshot progress or not."""
    if not watermark:
        return None
    return watermark.partition(_MARK)[0]


@dataclass
class Chunk:
    """One chunk's rows (text values) and its window: ``newer(change position, xid)`` tells whether
    a change of the log lies in the window and was not seen by the read."""

    rows: list[tuple[Any, ...]]
    keys: list[Key]
    high: str  # sort text of the high watermark: the kept rows' _cdc_position prefix
    newer: Callable[[Any, int], bool]
    size: int


class Staged:
    """A table's chunked snapshot in one run: the chunks read (their rows staged in a Parquet file
    beside the changes'), the keys the log showed newer, and the progress it reaches."""

    def __init__(self, path: str, schema: pa.Schema, key_index: Sequence[int], progress: Progress) -> None:
        self.path, self.key_index = path, list(key_index)
        self.writer: pq.ParquetWriter | None = pq.ParquetWriter(path, schema)
        self.progress, self.done = progress, False
        self.where: dict[Key, Chunk] = {}
        self.dropped: set[Key] = set()

    def key(self, values: Sequence[Any]) -> Key:
        return tuple(values[i] for i in self.key_index)

    def add(self, chunk: Chunk, snapshot_op: str) -> None:
        """Stage a chunk's rows at its high watermark (numbered on from the snapshot's rows)."""
        first = self.progress.rows
        if chunk.rows:
            assert self.writer is not None
            meta = [
                (snapshot_op, f"{chunk.high}:S{first + i:012d}", None, False) for i in range(len(chunk.rows))
            ]
            names = self.writer.schema.names
            width = len(names) - 4
            arrays = [
                staged_array([r[i] for r in chunk.rows], self.writer.schema.field(i).type)
                for i in range(width)
            ]
            arrays += [
                pa.array([m[i] for m in meta], self.writer.schema.field(width + i).type) for i in range(4)
            ]
            self.writer.write_table(pa.Table.from_arrays(arrays, schema=self.writer.schema))
            for key in chunk.keys:
                self.where[key] = chunk
        last = chunk.keys[-1] if chunk.keys else self.progress.after
        self.progress = Progress(last, first + len(chunk.rows))
        self.done = len(chunk.rows) < chunk.size

    def saw(self, values: Sequence[Any], at: Any, xid: int = 0) -> None:
        """A change of the log on this table: its key's chunk row goes when the change is newer."""
        key = self.key(values)
        chunk = self.where.get(key)
        if chunk is not None and chunk.newer(at, xid):
            self.dropped.add(key)

    def rows_kept(self) -> Iterator[pa.RecordBatch]:
        """The staged rows minus those the log showed newer, in batches (the writer is closed)."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        for batch in pq.ParquetFile(self.path).iter_batches(batch_size=10_000):
            if self.dropped:
                columns = [batch.column(i).to_pylist() for i in self.key_index]
                keep = [tuple(c[r] for c in columns) not in self.dropped for r in range(batch.num_rows)]
                batch = batch.filter(pa.array(keep))
            if batch.num_rows:
                yield batch

    def watermark(self, position: str) -> str:
        return join(position, None if self.done else self.progress)


def size_settings(props: Any) -> tuple[int, int]:
    """``(chunk size, chunks per run)`` from the flow's properties (refused on save when below 1)."""
    size = props.get_int(CHUNK_SIZE_KEY) or DEFAULT_CHUNK_SIZE
    per_run = props.get_int(CHUNKS_PER_RUN_KEY) or DEFAULT_CHUNKS_PER_RUN
    return max(1, size), max(1, per_run)


# PostgreSQL


def pg_key(conn: Any, table: str) -> list[tuple[str, str]]:
    """``(column, SQL type)`` of the table's primary key in key order; empty without one."""
    rows = conn.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_index i"
        " CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)"
        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
        " WHERE i.indrelid = to_regclass(%s) AND i.indisprimary ORDER BY k.n",
        (table,),
    ).fetchall()
    return [(str(r[0]), str(r[1])) for r in rows]


def pg_chunk(
    conn: Any, table: str, names: Sequence[str], key: Sequence[tuple[str, str]], after: Key | None, size: int
) -> Chunk:
    """The next chunk after ``after`` in a short REPEATABLE READ transaction of its own: its
    snapshot is the low watermark, the flushed position read after the rows the high one. A change
    is newer when its transaction is one the snapshot does not see and it ended by the high mark."""
    # Columns named through the table's alias: a bare ORDER BY name would sort by the text output
    # column of that name (the select list wins), not by the key's own type.
    select = sql.SQL(", ").join(sql.SQL("t.{}::text").format(sql.Identifier(n)) for n in names)
    order = sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(k)) for k, _ in key)
    query = sql.SQL("SELECT {} FROM {} AS t").format(select, pgconn.table_ident(table))
    params: list[Any] = []
    if after is not None:
        bound = sql.SQL(", ").join(sql.SQL("%s::{}").format(sql.SQL(kind)) for _, kind in key)
        query += sql.SQL(" WHERE ({}) > ({})").format(order, bound)
        params = list(after)
    query += sql.SQL(" ORDER BY {} LIMIT {}").format(order, sql.Literal(size))
    where = [names.index(k) for k, _ in key]
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        snap, _ = pg.snapshot_point(conn)
        rows = conn.execute(query, params).fetchall()
        high = pg.flushed(conn)

    def newer(end_lsn: int, xid: int) -> bool:
        return end_lsn <= high and not snap.sees(xid)

    return Chunk(rows, [tuple(r[i] for i in where) for r in rows], f"{high:016X}", newer, size)


# MariaDB


def _quote(name: str) -> str:
    return f"`{name.replace('`', '``')}`"


def mariadb_key(conn: Any, table: str) -> list[str]:
    """The table's primary key columns in key order; empty without one."""
    schema, _, name = table.partition(".")
    with conn.cursor() as cur:
        cur.execute(
            "SELECT column_name FROM information_schema.key_column_usage WHERE table_schema = %s"
            " AND table_name = %s AND constraint_name = 'PRIMARY' ORDER BY ordinal_position",
            (schema, name),
        )
        return [str(r[0]) for r in cur.fetchall()]


def mariadb_sort_text(position: mysql.Position) -> str:
    """Text that sorts after every change ``position`` covers and before every later one (in its
    first replication domain, as the changes' own places do)."""
    if isinstance(position, mysql.Gtids):
        domain, server, seq = position.last[0] if position.last else (0, 0, 0)
        return mysql.Gtid(domain, seq, server, 999_999).text()
    return position.text()


def mariadb_chunk(
    conn: Any,
    table: str,
    names: Sequence[str],
    key: Sequence[str],
    after: Key | None,
    size: int,
    *,
    gtids: bool,
) -> tuple[Chunk, mysql.Position]:
    """The next chunk after ``after`` in a consistent snapshot of its own, and its low watermark:
    the binlog position MariaDB says that snapshot matches (exactly: it sees every change up to it
    and none after). The high watermark is the server's position read after the rows; a change
    between the two is newer than the chunk."""
    order = ", ".join(_quote(k) for k in key)
    statement = mysql_values.select_from(conn, table, names)
    params: list[Any] = []
    if after is not None:
        statement += f" WHERE ({order}) > ({', '.join(['%s'] * len(key))})"
        params = list(after)
    statement += f" ORDER BY {order} LIMIT {int(size)}"
    with conn.cursor() as cur:
        try:
            low: mysql.Position = mysql.begin_snapshot(cur)
            cur.execute(statement, params)
            rows = mysql_values.snapshot_rows(table, cur.description, cur.fetchall())
        finally:
            cur.execute("COMMIT")
    if gtids:
        low = mysql.in_gtids(conn, low)
    high = mysql.current(conn)
    if type(high) is not type(low):
        high = low

    def newer(at: Any, _xid: int) -> bool:
        return not low.covers(at) and high.covers(at)

    where = [names.index(k) for k in key]
    return Chunk(rows, [tuple(r[i] for i in where) for r in rows], mariadb_sort_text(high), newer, size), low
