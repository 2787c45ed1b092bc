"""A flow's PostgreSQL replication slot and publication: named, created, read, advanced and dropped.

Each CDC flow owns one publication (the tables it captures) and one logical replication slot with
the built-in ``pgoutput`` plugin, both named :func:`slot_name` (from the flow's id and name, so a
re-created flow of the same name starts fresh). The slot keeps the server's write-ahead log from
its confirmed position on: it is read with ``pg_logical_slot_peek_binary_changes``, which does not
move it, and moved with ``pg_replication_slot_advance`` only to a position every table of the flow
has committed (:func:`advance`), so a run that dies before its commit reads the same changes again.
:func:`drop` removes both when the flow is deleted.

Every connection is judged where it lands before its first statement (:mod:`portal.pipeline.landing`):
the portal's own database is refused here as in every other reader.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from portal.pipeline import landing, pgconn, usernode
from portal.pipeline.cdc.pgoutput import format_lsn, parse_lsn
from portal.pipeline.errors import ConfigError, PipelineError

PLUGIN = "pgoutput"
# What a run that cannot go on from its position tells the user to do.
ASK_RESNAPSHOT = (
    "Ask for a new snapshot (the flow page's 'Take a new snapshot', or POST "
    "/api/flowconfigs/<group>/<name>/resnapshot): the next run reads the tables whole again"
)
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*\.[A-Za-z_][A-Za-z0-9_$]*$")


def table_problems(tables: Sequence[str], key: str) -> list[str]:
    """Why the captured tables cannot be read: each is named ``schema.table`` (plain identifiers),
    so the publication names exactly it; patterns are not matched."""
    return [
        f"{key}: '{table[:80]}' is not a table named schema.table (plain names, no patterns)"
        for table in tables
        if not _TABLE.match(table)
    ]


def slot_name(flow_id: int | None, flow_group: str, flow_name: str) -> str:
    """The slot's and publication's name: ``fp_cdc_<flow id>_<hash of group/name>`` (a slot name
    takes lower-case letters, digits and ``_`` only, 63 at most)."""
    digest = hashlib.sha256(f"{flow_group}/{flow_name}".encode()).hexdigest()
    return f"fp_cdc_{flow_id}_{digest[:12]}" if flow_id is not None else f"fp_cdc_{digest[:20]}"


def connect(
    url: str,
    user: str | None,
    password: str | None,
    *,
    what: str,
    portal: Iterable[landing.Landing] | None = None,
    timeout: int | None = None,
    bounds: usernode.Bounds | None = None,
) -> psycopg.Connection:
    """An autocommit connection where the ``jdbc:postgresql:`` URL points (read as pgJDBC reads it),
    refused before its first statement when it lands in the portal's own database; ``timeout``
    bounds connecting and each statement (a page's or a monitor's look at the slot)."""
    if pgconn.parse_url(url) is None:
        raise ConfigError(
            f"source.jdbc.url: change data capture reads PostgreSQL (jdbc:postgresql://...), "
            f"not '{url.split('?')[0][:60]}'"
        )
    conn = pgconn.connect(
        url,
        user,
        password,
        what=what,
        autocommit=True,
        portal=portal,
        timeout=timeout,
        bounds=bounds.for_capture() if bounds is not None else None,
    )
    try:
        conn.execute("SET TimeZone = 'UTC'")  # pgoutput prints timestamptz values in this zone
    except BaseException:
        conn.close()
        raise
    return conn


@dataclass(frozen=True)
class SlotState:
    """A slot as the server sees it. ``current`` is the server's log position now; the slot keeps
    the log from ``restart`` on (``retained_bytes``) and has been acknowledged up to ``confirmed``.
    ``wal_status`` is the server's word (``reserved``, ``extended``, ``unreserved``, ``lost``);
    ``safe_wal_bytes`` how much more log may be written before the slot is lost, None when the
    server keeps log for slots without bound (``max_slot_wal_keep_size = -1``)."""

    confirmed: int
    wal_status: str | None
    active: bool
    retained_bytes: int
    current: int = 0
    safe_wal_bytes: int | None = None

    @property
    def lag_bytes(self) -> int:
        """Log written since the slot's acknowledged position."""
        return max(0, self.current - self.confirmed)


def state(conn: psycopg.Connection, name: str) -> SlotState | None:
    """The slot's confirmed position and health, None when there is no such slot (one query)."""
    row = conn.execute(
        "SELECT confirmed_flush_lsn::text, wal_status, active,"
        " pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, pg_current_wal_lsn()::text,"
        " safe_wal_size FROM pg_replication_slots WHERE slot_name = %s",
        (name,),
    ).fetchone()
    if row is None:
        return None
    return SlotState(
        parse_lsn(row[0]) if row[0] else 0,
        row[1],
        bool(row[2]),
        int(row[3] or 0),
        parse_lsn(row[4]),
        None if row[5] is None else int(row[5]),
    )


def _check_wal_level(conn: psycopg.Connection, what: str) -> None:
    row = conn.execute("SHOW wal_level").fetchone()
    if row is None or row[0] != "logical":
        raise ConfigError(
            f"{what}: change data capture needs wal_level=logical on the server (it is "
            f"'{row[0] if row else '?'}'; set it in postgresql.conf and restart the server)"
        )


def ensure(conn: psycopg.Connection, name: str, tables: Sequence[str], what: str) -> bool:
    """The publication holds exactly ``tables`` (``schema.table``) and the slot exists; True when
    the slot was created now (its position is the server's current one)."""
    _check_wal_level(conn, what)
    idents = sql.SQL(", ").join(pgconn.table_ident(t) for t in tables)
    exists = conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,)).fetchone()
    statement = "ALTER PUBLICATION {} SET TABLE {}" if exists else "CREATE PUBLICATION {} FOR TABLE {}"
    try:
        conn.execute(sql.SQL(statement).format(sql.Identifier(name), idents))
    except psycopg.errors.InsufficientPrivilege as error:
        raise ConfigError(
            f"{what}: the user may not publish {', '.join(tables)} ({error.diag.message_primary})"
        ) from None
    if state(conn, name) is not None:
        return False
    try:
        conn.execute("SELECT pg_create_logical_replication_slot(%s, %s)", (name, PLUGIN))
    except psycopg.errors.InsufficientPrivilege:
        raise ConfigError(
            f"{what}: the user may not create a replication slot (it needs the REPLICATION attribute)"
        ) from None
    return True


def peek(conn: psycopg.Connection, name: str, upto: int, limit: int | None) -> Iterator[tuple[int, bytes]]:
    """The slot's messages ``(lsn, bytes)`` from its confirmed position up to ``upto`` (whole
    transactions; after ``limit`` messages, the transaction under way is the last). The slot does
    not move."""
    cursor_name = f"{name}_peek"
    with conn.transaction(), conn.cursor(name=cursor_name) as cur:
        cur.itersize = 5000
        cur.execute(
            "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, %s,"
            " 'proto_version', '1', 'publication_names', %s)",
            (name, format_lsn(upto), limit, name),
        )
        for lsn, data in cur:
            yield parse_lsn(lsn), bytes(data)


def peek_batches(
    conn: psycopg.Connection, name: str, upto: int, limit: int | None, size: int = 5000
) -> Iterator[list[bytes]]:
    """What :func:`peek` reads, the messages alone in lists of up to ``size`` (in binary form: no
    position text to parse, no hex to decode), for :mod:`portal.pipeline.cdc.pgoutput_batch`."""
    with conn.transaction(), conn.cursor(name=f"{name}_peek") as cur:
        cur.execute(
            "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, %s,"
            " 'proto_version', '1', 'publication_names', %s)",
            (name, format_lsn(upto), limit, name),
            binary=True,
        )
        while rows := cur.fetchmany(size):
            yield [bytes(r[0]) for r in rows]


def advance(conn: psycopg.Connection, name: str, position: int) -> bool:
    """Move the slot to ``position`` when it is behind it (the server then frees the log before
    it); True when it moved. Never backwards: a slot is only ever released, not rewound."""
    found = state(conn, name)
    if found is None or found.confirmed >= position:
        return False
    conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (name, format_lsn(position)))
    return True


def drop(conn: psycopg.Connection, name: str) -> list[str]:
    """Drop the flow's slot and publication where they exist; what was dropped."""
    dropped = []
    if state(conn, name) is not None:
        try:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (name,))
        except psycopg.errors.ObjectInUse:
            raise PipelineError(
                f"replication slot {name} is in use by a running job; drop it later"
            ) from None
        dropped.append(f"slot {name}")
    if conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,)).fetchone():
        conn.execute(sql.SQL("DROP PUBLICATION {}").format(sql.Identifier(name)))
        dropped.append(f"publication {name}")
    return dropped


@dataclass(frozen=True)
class Snapshot:
    """A transaction snapshot (``pg_current_snapshot()``): which transactions' effects it sees."""

    xmin: int
    xmax: int
    xip: frozenset[int]

    @classmethod
    def parse(cls, text: str) -> Snapshot:
        xmin, xmax, xip = text.split(":")
        return cls(int(xmin), int(xmax), frozenset(int(x) for x in xip.split(",") if x))

    def sees(self, xid32: int) -> bool:
        """Whether the snapshot sees the transaction with this 32-bit id (pgoutput sends 32 bits;
        the snapshot's 64-bit ids carry the epoch)."""
        xid = ((self.xmax >> 32) << 32) | xid32
        if xid > self.xmax:
            xid -= 1 << 32
        if xid < self.xmin:
            return True
        return xid < self.xmax and xid not in self.xip


def columns(conn: psycopg.Connection, table: str) -> list[tuple[str, int, int, bool, str]]:
    """``(name, type oid, type modifier, in the primary key, SQL type)`` of the table's columns, in
    order; an empty list when there is no such table."""
    rows = conn.execute(
        "SELECT a.attname, a.atttypid::int, a.atttypmod,"
        " COALESCE(a.attnum = ANY(i.indkey::int2[]), false), format_type(a.atttypid, a.atttypmod)"
        " FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary"
        " WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        (table,),
    ).fetchall()
    return [(str(r[0]), int(r[1]), int(r[2]), bool(r[3]), str(r[4])) for r in rows]


def read_text_rows(
    conn: psycopg.Connection, table: str, names: Sequence[str], batch: int = 10_000
) -> Iterator[list[tuple[Any, ...]]]:
    """The table's rows with every value in its text form (as pgoutput sends them), in batches;
    inside the caller's transaction (the snapshot)."""
    select = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(n)) for n in names)
    query = sql.SQL("SELECT {} FROM {}").format(select, pgconn.table_ident(table))
    with conn.cursor(name=f"fp_snap_{abs(hash(table)) % 10**8}") as cur:
        cur.itersize = batch
        cur.execute(query)
        while rows := cur.fetchmany(batch):
            yield rows


def snapshot_point(conn: psycopg.Connection) -> tuple[Snapshot, int]:
    """Inside a REPEATABLE READ transaction: its snapshot and the flushed log position, which every
    transaction the snapshot sees lies before (a committed transaction's commit record is flushed)."""
    row = conn.execute("SELECT pg_current_snapshot()::text, pg_current_wal_flush_lsn()::text").fetchone()
    assert row is not None
    return Snapshot.parse(row[0]), parse_lsn(row[1])


def flushed(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    assert row is not None
    return parse_lsn(row[0])


def positions(watermarks: Mapping[str, str | None]) -> dict[str, int]:
    """The tables' committed log positions, from their watermarks (``X/X``)."""
    found = {}
    for table, text in watermarks.items():
        if text:
            try:
                found[table] = parse_lsn(text)
            except ValueError:
                raise PipelineError(
                    f"{table}: the stored watermark '{text[:40]}' is not a log position; a CDC flow "
                    f"keeps positions like 0/16B3748. {ASK_RESNAPSHOT}"
                ) from None
    return found
