"""Change data capture from a MariaDB binary log (row-based), read with ``mysql-replication``.

A binlog needs no slot: the server keeps its files for ``expire_logs_days``/``binlog_expire_logs_seconds``
whatever its readers do, so a position older than the oldest file is lost, and nothing is created
or dropped on the server.

A position is a GTID position (:class:`Gtids`, ``gtid:<domain>-<server id>-<sequence>[,...]``, the
last transaction read per replication domain) once the server has logged a transaction: the stream
asks the server for what follows it, so the position outlives rotated and purged files and holds on
another server of the same topology after a failover. A server with no GTID yet (nothing logged
since ``RESET MASTER``) gives a file offset (:class:`FilePosition`, ``<binlog file>:<offset, 12
digits>``), and a file offset stored earlier is turned into the GTID position there
(``BINLOG_GTID_POS``) as soon as the server has GTIDs. Each change is placed by text that sorts in
log order: its transaction's domain and sequence and its event's number in the transaction (or its
file and offset).

The first read of a table is a snapshot: ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and MariaDB's
``binlog_snapshot_file``/``binlog_snapshot_position``, the binlog position that snapshot matches
exactly (MySQL has no such status; it is refused), in GTIDs where the server has them. The server must log rows with their column names:
``log_bin`` on, ``binlog_format=ROW``, ``binlog_row_metadata=FULL`` (MariaDB 10.5+).

The SQL connection is judged where it lands (:mod:`portal.pipeline.landing`): never the portal's own
database, and the tables only in the database the connection landed in; the binlog stream, which
carries every database of the server, is filtered to that database.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

from portal.pipeline import landing, usernode
from portal.pipeline.cdc.mysql_values import forms, row_text, select_from, snapshot_rows
from portal.pipeline.cdc.pg import ASK_RESNAPSHOT
from portal.pipeline.errors import ConfigError, PipelineError


@dataclass(frozen=True, order=True)
class FilePosition:
    """A place in one server's binlog files: meaningless on another server (a failover)."""

    file: str
    offset: int

    def text(self) -> str:
        return f"{self.file}:{self.offset:012d}"

    def covers(self, at: FilePosition) -> bool:
        return at <= self

    def later(self, other: FilePosition) -> FilePosition:
        return max(self, other)

    def earlier(self, other: FilePosition) -> FilePosition:
        return min(self, other)

    def sort_text(self) -> str:
        return self.text()


@dataclass(frozen=True, order=True)
class Gtid:
    """One transaction's global id, and an event's place in it: where a change lies."""

    domain: int
    seq: int
    server: int
    event: int = 0

    def text(self) -> str:
        return f"gtid:{self.domain:010d}-{self.seq:020d}:{self.event:06d}"


@dataclass(frozen=True)
class Gtids:
    """A MariaDB GTID position (``@@gtid_binlog_pos``): per replication domain, the last transaction
    ``(domain, server id, sequence)``. Every server of a replication topology numbers a domain's
    transactions alike, so the position survives a failover to a replica, unlike a file offset."""

    last: tuple[tuple[int, int, int], ...]

    @classmethod
    def parse(cls, text: str) -> Gtids:
        found: dict[int, tuple[int, int, int]] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            pieces = part.split("-")
            if len(pieces) != 3 or not all(x.isdigit() for x in pieces):
                raise ValueError(f"'{text[:80]}' is not a GTID position like gtid:0-1-42")
            domain, server, seq = (int(x) for x in pieces)
            found[domain] = (domain, server, seq)
        return cls(tuple(found[d] for d in sorted(found)))

    def text(self) -> str:
        return "gtid:" + ",".join(f"{d}-{server}-{seq}" for d, server, seq in self.last)

    def seq(self, domain: int) -> int | None:
        return next((seq for d, _, seq in self.last if d == domain), None)

    def covers(self, at: Gtid) -> bool:
        seq = self.seq(at.domain)
        return seq is not None and at.seq <= seq

    def later(self, other: Gtids) -> Gtids:
        merged = {d: (d, server, seq) for d, server, seq in other.last}
        for d, server, seq in self.last:
            if d not in merged or merged[d][2] < seq:
                merged[d] = (d, server, seq)
        return Gtids(tuple(merged[d] for d in sorted(merged)))

    def earlier(self, other: Gtids) -> Gtids:
        """Where both are: a domain only one has is read from its start."""
        mine = {d: (d, server, seq) for d, server, seq in self.last}
        both = [
            min(mine[d], (d, server, seq), key=lambda g: g[2]) for d, server, seq in other.last if d in mine
        ]
        return Gtids(tuple(sorted(both)))

    def sort_text(self) -> str:
        """Text that sorts before every change this position does not cover (in its first domain)."""
        domain, server, seq = self.last[0] if self.last else (0, 0, 0)
        return Gtid(domain, seq, server).text()

    def __gt__(self, other: Gtids) -> bool:
        return self != other and self.later(other) == self

    def __lt__(self, other: Gtids) -> bool:
        return self != other and other.later(self) == other


Position = FilePosition | Gtids


def format_position(position: Position) -> str:
    return position.text()


def parse_position(text: str) -> Position:
    """``gtid:<domain>-<server>-<seq>[,...]`` or ``<binlog file>:<offset>``."""
    text = text.strip()
    if text.startswith("gtid:"):
        return Gtids.parse(text[len("gtid:") :])
    name, sep, offset = text.rpartition(":")
    if not sep or not name or not offset.isdigit():
        raise ValueError(
            f"'{text[:80]}' is not a binlog position like gtid:0-1-42 or binlog.000001:000000000325"
        )
    return FilePosition(name, int(offset))


@dataclass(frozen=True)
class Server:
    """Where the node points, and who connects (the stream opens connections of its own)."""

    host: str
    port: int
    database: str
    user: str
    password: str

    def settings(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "user": self.user, "passwd": self.password}


def server_of(url: str, user: str | None, password: str | None) -> Server:
    parsed = urlparse(url[len("jdbc:") :])
    params = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    database = landing.url_database(url) or ""  # as the driver reads it (not ";a=b")
    if not database:
        raise ConfigError("source.jdbc.url: change data capture needs the node's database in its URL")
    return Server(
        parsed.hostname or "localhost",
        parsed.port or 3306,
        database,
        user or params.get("user") or "",
        password or params.get("password") or "",
    )


def connect(
    server: Server,
    tables: Sequence[str],
    *,
    what: str,
    portal: Iterable[landing.Landing] | None,
    timeout: int | None = None,
    bounds: usernode.Bounds | None = None,
) -> Any:
    """A PyMySQL connection, refused before any statement of ours when it landed in the portal's own
    database or when a captured table lies outside the database it landed in; ``timeout`` bounds
    connecting and each read (a page's or a monitor's look at the binlog)."""
    import pymysql  # the MariaDB driver: loaded only by a MariaDB source

    limits = {} if timeout is None else {"connect_timeout": timeout, "read_timeout": timeout}
    conn = pymysql.connect(
        host=server.host,
        port=server.port,
        database=server.database,
        user=server.user,
        password=server.password,
        autocommit=True,
        init_command="SET time_zone = '+00:00'",  # a TIMESTAMP read as UTC, as the binlog sends it
        **limits,
    )
    try:
        found = landing.check(conn, what, portal=portal, bounds=bounds.for_capture() if bounds else None)
        landing.own_database(found, {"source.cdc.tables": list(tables)}, what)
    except BaseException:
        conn.close()
        raise
    return conn


def _one(conn: Any, statement: str) -> tuple[Any, ...] | None:
    with conn.cursor() as cur:
        cur.execute(statement)
        row = cur.fetchone()
    return tuple(row) if row else None


def check_server(conn: Any, what: str) -> None:
    values = {}
    with conn.cursor() as cur:
        cur.execute(
            "SHOW VARIABLES WHERE Variable_name IN ('log_bin', 'binlog_format', 'binlog_row_metadata', 'version')"
        )
        values = {str(k).lower(): str(v) for k, v in cur.fetchall()}
    if "mariadb" not in values.get("version", "").lower():
        raise ConfigError(
            f"{what}: binlog change data capture reads MariaDB (its consistent snapshot position)"
        )
    wanted = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_metadata": "FULL"}
    wrong = [f"{k}={values.get(k, '?')}" for k, v in wanted.items() if values.get(k, "").upper() != v]
    if wrong:
        raise ConfigError(
            f"{what}: change data capture needs log_bin=ON, binlog_format=ROW and binlog_row_metadata=FULL "
            f"on the server (it has {', '.join(wrong)})"
        )


def current(conn: Any) -> Position:
    """Where the server's log is now: its GTID position when it has one (every MariaDB server that
    logged a transaction), else the file offset."""
    row = _one(conn, "SELECT @@gtid_binlog_pos")
    if row and row[0]:
        return Gtids.parse(str(row[0]))
    row = _one(conn, "SHOW MASTER STATUS")
    if row is None:
        raise ConfigError("the server writes no binary log (log_bin is off)")
    return FilePosition(str(row[0]), int(row[1]))


def in_gtids(conn: Any, position: Position) -> Position:
    """A file offset as the GTID position there (``BINLOG_GTID_POS``), when the server keeps its file:
    positions stored before the server had GTIDs carry on in GTIDs. Unchanged otherwise."""
    if isinstance(position, Gtids) or not available(conn, position):
        return position
    row = _one(conn, f"SELECT BINLOG_GTID_POS('{position.file.replace(chr(39), '')}', {position.offset})")
    return position if row is None or row[0] is None else Gtids.parse(str(row[0]))


def available(conn: Any, position: Position) -> bool:
    """Whether the server still has the binlog file of a file position (a GTID position is checked
    by the server when the stream asks for it)."""
    if isinstance(position, Gtids):
        return True
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return any(str(row[0]) == position.file for row in cur.fetchall())


def begin_snapshot(cur: Any) -> FilePosition:
    """Open a consistent snapshot on ``cur`` (its caller commits it) and return the binlog position
    it matches: what MariaDB reports for it, exact, not read before or after."""
    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    cur.execute("SHOW STATUS WHERE Variable_name IN ('binlog_snapshot_file', 'binlog_snapshot_position')")
    status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
    return FilePosition(status["binlog_snapshot_file"], int(status["binlog_snapshot_position"]))


def snapshot(
    conn: Any, tables: Sequence[tuple[str, Sequence[str]]], batch: int = 10_000, *, gtids: bool = False
) -> Iterator[Any]:
    """In one consistent snapshot: first its binlog position (in GTIDs when ``gtids``), then
    ``(table, rows)`` batches with values as text."""
    with conn.cursor() as cur:
        try:
            point = begin_snapshot(cur)
            yield in_gtids(conn, point) if gtids else point
            for table, names in tables:
                cur.execute(select_from(conn, table, names))
                while rows := cur.fetchmany(batch):
                    yield table, snapshot_rows(table, cur.description, rows)
        finally:
            cur.execute("COMMIT")


@dataclass
class RowChange:
    op: str
    table: str
    values: dict[str, str | bytes | None]
    position: FilePosition | Gtid
    index: int
    commit_time: dt.datetime


def server_id(name: str) -> int:
    """The replica id the stream announces: stable per flow, far from the small ids servers use."""
    return 1_000_000 + int(hashlib.sha256(name.encode()).hexdigest()[:7], 16)


def changes(  # noqa: C901, PLR0915
    server: Server,
    name: str,
    start: Position,
    upto: Position,
    tables: Sequence[str],
    keys: Mapping[str, Sequence[str]] | None = None,
) -> Iterator[RowChange]:
    """The row changes of ``tables`` after ``start`` up to ``upto``, in log order. A GTID ``start``
    asks the server for the transactions after it (any server holding them will do); each change
    is then placed by its transaction's GTID and its event's number in the transaction. An update
    that changes a table's key (``keys``: its primary key columns) comes after a delete of its old
    key in the same place, so a destination merging by key removes the row it moved away from.

    One connection serves the whole read: the dump blocks, and the read ends by itself once the
    transaction ``upto`` names (in every domain) has ended, or at ``upto``'s file offset. A
    non-blocking dump would end with the server closing the connection, and the library's MariaDB
    dump request is one byte longer than it declares: the server closes with that byte unread, a
    reset that throws away what the client has not read yet, and the library then reads again from
    the start (a reconnect every few seconds, a 20,000-change read at ~165 changes/s). A heartbeat,
    which the server sends only once the reader has everything it has, ends the read too."""
    import pymysql  # the MariaDB driver: loaded only by a MariaDB source
    from pymysqlreplication import BinLogStreamReader  # type: ignore[import-untyped]
    from pymysqlreplication.event import (  # type: ignore[import-untyped]
        HeartbeatLogEvent,
        MariadbGtidEvent,
        QueryEvent,
        XidEvent,
    )
    from pymysqlreplication.row_event import (  # type: ignore[import-untyped]
        DeleteRowsEvent,
        UpdateRowsEvent,
        WriteRowsEvent,
    )

    wanted = {t.partition(".")[2]: t for t in tables}
    where: dict[str, Any]
    # The domains whose last transaction up to ``upto`` is still to be read.
    pending: dict[int, int] = {}
    if isinstance(upto, Gtids):
        covered = start if isinstance(start, Gtids) else Gtids(())
        pending = {d: seq for d, _, seq in upto.last if (covered.seq(d) or 0) < seq}
        if not pending:
            return
    if isinstance(start, Gtids) and start.last:
        where = {"auto_position": start.text().removeprefix("gtid:")}
    elif isinstance(start, Gtids):  # no transaction before the start: every one in the binlog is after
        where = {"log_file": None, "log_pos": None}
    else:
        where = {"log_file": start.file, "log_pos": start.offset, "resume_stream": True}
    stream = BinLogStreamReader(
        # A slow reader (a busy worker) is not cut off by the server's 60 s default.
        connection_settings={**server.settings(), "init_command": "SET SESSION net_write_timeout = 600"},
        server_id=server_id(name),
        blocking=True,
        slave_heartbeat=1,
        only_events=[
            MariadbGtidEvent,
            XidEvent,
            QueryEvent,
            HeartbeatLogEvent,
            WriteRowsEvent,
            UpdateRowsEvent,
            DeleteRowsEvent,
        ],
        only_schemas=[server.database],
        is_mariadb=True,
        **{k: v for k, v in where.items() if v is not None},
    )
    gtid: Gtid | None = None
    standalone = False  # the transaction is one statement (DDL): no COMMIT or XID ends it
    # The domains whose transactions went past ``upto``: once all have, the run's share is read (a
    # server written to without pause would otherwise keep the stream from ever reaching its end).
    past: set[int] = set()
    ends = {d for d, _, _ in upto.last} if isinstance(upto, Gtids) else set()
    # The library reconnects by itself on a lost connection (2013, 2006) and reads again from the
    # start position: what was read already is skipped, by its place in the log.
    done: dict[int, tuple[int, int]] = {}
    done_file: FilePosition | None = None
    try:
        for event in stream:
            if isinstance(event, HeartbeatLogEvent):
                break  # the server waits for new transactions: everything it had was read
            if isinstance(event, MariadbGtidEvent):
                gtid = Gtid(event.domain_id, event.gtid_seq_no, event.server_id)
                standalone = bool(event.flags & 1)  # FL_STANDALONE
                if isinstance(upto, Gtids) and ends and not upto.covers(gtid):
                    past.add(gtid.domain)
                    if past >= ends:
                        break
                continue
            if isinstance(event, (XidEvent, QueryEvent)):
                ended = isinstance(event, XidEvent) or standalone or _commits(event.query)
                if isinstance(upto, FilePosition):
                    if FilePosition(str(stream.log_file), int(event.packet.log_pos)) >= upto:
                        break
                elif ended and gtid is not None and gtid.seq >= pending.get(gtid.domain, gtid.seq + 1):
                    del pending[gtid.domain]
                    if not pending:
                        break
                continue
            position: FilePosition | Gtid
            if isinstance(upto, Gtids):
                if gtid is None:
                    continue  # the tail of a transaction begun before the start
                gtid = position = Gtid(gtid.domain, gtid.seq, gtid.server, gtid.event + 1)
                if not upto.covers(position):
                    continue  # committed after the run was planned: the next run's
                if (position.seq, position.event) <= done.get(position.domain, (-1, -1)):
                    continue  # read before the library reconnected
                done[position.domain] = (position.seq, position.event)
            else:
                position = FilePosition(str(stream.log_file), int(event.packet.log_pos))
                if position > upto:
                    break
                if done_file is not None and position <= done_file:
                    continue  # read before the library reconnected
                done_file = position
            yield from _row_changes(event, wanted, keys, position)
    except pymysql.err.OperationalError as error:
        if error.args and error.args[0] == 1236:  # the server no longer has the log the position needs
            raise PipelineError(
                f"the server cannot send the binlog from {start.text()} ({str(error.args[-1])[:200]}); "
                f"nothing was read. {ASK_RESNAPSHOT}"
            ) from None
        raise
    finally:
        stream.close()


def _commits(query: Any) -> bool:
    """Whether a query event ends its transaction (a non-transactional table's ``COMMIT``)."""
    text = query.decode(errors="replace") if isinstance(query, bytes) else str(query)
    return text.strip().upper() in ("COMMIT", "XA COMMIT")


def _row_changes(
    event: Any,
    wanted: Mapping[str, str],
    keys: Mapping[str, Sequence[str]] | None,
    position: FilePosition | Gtid,
) -> Iterator[RowChange]:
    """A rows event's changes of the wanted tables."""
    from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

    table = wanted.get(event.table)
    if table is None:
        return
    stamp = dt.datetime.fromtimestamp(event.timestamp, dt.UTC)
    formed = forms(event.columns)  # per event: a table may change between two
    for index, row in enumerate(event.rows):
        if isinstance(event, UpdateRowsEvent):
            op, values, before = "u", row["after_values"], row["before_values"]
            why = row.get("after_none_sources") or {}
            key = (keys or {}).get(table) or ()
            if any(before.get(k) != values.get(k) for k in key):
                gone = row_text(
                    table, {k: before.get(k) for k in key}, row.get("before_none_sources") or {}, formed
                )
                yield RowChange("d", table, gone, position, index, stamp)
        else:
            op, values = ("c" if isinstance(event, WriteRowsEvent) else "d"), row["values"]
            why = row.get("none_sources") or {}
        if any(str(k).startswith("UNKNOWN_COL") for k in values):
            raise PipelineError("the binlog carries no column names: set binlog_row_metadata=FULL")
        found = row_text(table, values, why, formed)
        yield RowChange(op, table, found, position, index, stamp)
