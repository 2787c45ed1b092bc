"""How far a MariaDB binlog flow is behind its server, and whether the server still has the log its
position needs: what the flow page's card and the slot monitor show for a flow that has no slot.

A binlog keeps nothing for its readers (the server expires files by age, ``expire_logs_days`` /
``binlog_expire_logs_seconds``, or on ``PURGE BINARY LOGS``), so the questions are the slot's minus
the retention: *lag* in bytes of binlog and, for a GTID position, in transactions; *expired* when
the files the position lies in are gone (the next run would fail, and only a new snapshot helps).

For a file position (``binlog.000002:000000000325``) the bytes are exact: the rest of its file and
every later one (``SHOW BINARY LOGS``). A GTID position has no file of its own: the file holding it
is the newest whose starting GTID list (``BINLOG_GTID_POS(file, 4)``) it covers, and the bytes are
counted from that file's start: at most one file more than the exact figure (``exact_bytes`` is then
False). The transactions behind are exact: per replication domain, the server's last sequence
number minus the position's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from portal.pipeline.cdc.mysql import FilePosition, Gtids, Position, current


@dataclass(frozen=True)
class BinlogLag:
    current: Position
    behind_bytes: int | None  # None when expired
    exact_bytes: bool
    behind_transactions: int | None  # GTID positions only
    retained_bytes: int  # what the server keeps of its binlog, whatever its readers
    oldest: str  # the oldest binlog file the server has
    expired: bool


def _files(conn: Any) -> list[tuple[str, int]]:
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [(str(row[0]), int(row[1])) for row in cur.fetchall()]


def _start_of(conn: Any, file: str) -> Gtids:
    """The GTID position at a binlog file's start (the transactions logged before it)."""
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, 4)", (file,))
        row = cur.fetchone()
    return Gtids.parse(str(row[0] or "")) if row else Gtids(())


def _covers(position: Gtids, start: Gtids) -> bool:
    return all((position.seq(d) or 0) >= seq for d, _, seq in start.last)


def read(conn: Any, since: Position) -> BinlogLag:
    """The server's binlog seen from the flow's position ``since`` (a handful of statements)."""
    files, now = _files(conn), current(conn)
    retained = sum(size for _, size in files)
    oldest = files[0][0] if files else ""
    if isinstance(since, FilePosition):
        names = [name for name, _ in files]
        if since.file not in names:
            return BinlogLag(now, None, True, None, retained, oldest, True)
        index = names.index(since.file)
        behind = max(0, files[index][1] - since.offset) + sum(size for _, size in files[index + 1 :])
        return BinlogLag(now, behind, True, None, retained, oldest, False)
    transactions = 0
    if isinstance(now, Gtids):
        transactions = sum(max(0, seq - (since.seq(d) or 0)) for d, _, seq in now.last)
    if transactions == 0:
        return BinlogLag(now, 0, True, 0, retained, oldest, False)
    behind = 0
    for name, size in reversed(files):  # newest first: usually the first file or two
        behind += size
        if _covers(since, _start_of(conn, name)):
            return BinlogLag(now, behind, False, transactions, retained, oldest, False)
    return BinlogLag(now, None, False, transactions, retained, oldest, True)
