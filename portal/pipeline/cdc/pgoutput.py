"""Decode PostgreSQL's ``pgoutput`` logical replication messages (protocol version 1).

psycopg has no streaming-replication protocol, so the CDC source reads a slot with the SQL function
``pg_logical_slot_peek_binary_changes`` (:mod:`portal.pipeline.cdc.pg`): each row is one message of
the protocol PostgreSQL documents under "Logical Replication Message Formats". This module turns
those bytes into transactions of row changes, with column values in PostgreSQL's text form (what
protocol version 1 sends); it does not talk to a server.

A Relation message precedes the first change of a table in a stream (and follows a schema change),
so :class:`Decoder` keeps the relations it has seen; a change to a relation it was never told about
is an error rather than a guess. Values a change did not carry (an unchanged TOAST value, ``u``) are
:data:`UNCHANGED`; the columns of a delete's old key tuple that are not part of the key are None.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from portal.pipeline.errors import PipelineError

EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)  # PostgreSQL's timestamps count from here


class _Unchanged:
    """A TOASTed value an update did not change (and so did not send)."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()
INSERT, UPDATE, DELETE, TRUNCATE = "c", "u", "d", "t"


def format_lsn(value: int) -> str:
    """PostgreSQL's ``X/X`` text form of a log position."""
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    """A log position from its ``X/X`` text form."""
    high, sep, low = text.strip().partition("/")
    if not sep:
        raise ValueError(f"'{text}' is not a log position like 0/16B3748")
    return (int(high, 16) << 32) | int(low, 16)


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    key: bool


@dataclass(frozen=True)
class Relation:
    oid: int
    namespace: str
    name: str
    columns: tuple[Column, ...]

    @property
    def qualified(self) -> str:
        return f"{self.namespace}.{self.name}"


@dataclass
class Change:
    """One row change: ``op`` is c/u/d (t: the table was truncated, no values)."""

    op: str
    relation: Relation
    values: dict[str, object]
    index: int  # its place in the transaction


@dataclass
class Transaction:
    xid: int
    final_lsn: int
    commit_time: dt.datetime
    end_lsn: int = 0
    changes: list[Change] = field(default_factory=list)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return int(value)

    def byte(self) -> str:
        value = chr(self.data[self.at])
        self.at += 1
        return value

    def string(self) -> str:
        end = self.data.index(b"\0", self.at)
        text = self.data[self.at : end].decode()
        self.at = end + 1
        return text

    def tuple(self, relation: Relation) -> dict[str, object]:
        count = self.take("!h")
        if count != len(relation.columns):
            raise PipelineError(
                f"pgoutput: {relation.qualified} sent {count} columns, its relation has {len(relation.columns)}"
            )
        values: dict[str, object] = {}
        for column in relation.columns:
            kind = self.byte()
            if kind == "n":
                values[column.name] = None
            elif kind == "u":
                values[column.name] = UNCHANGED
            elif kind in ("t", "b"):
                size = self.take("!i")
                raw = self.data[self.at : self.at + size]
                self.at += size
                values[column.name] = raw.decode() if kind == "t" else raw
            else:
                raise PipelineError(f"pgoutput: unknown tuple value kind {kind!r}")
        return values


def key_changed(relation: Relation, old: dict[str, object], new: dict[str, object]) -> bool:
    """Whether an update moved its row to another key: the old tuple (``K`` or ``O``) names a key
    value the new row no longer has. A destination merging by key must then delete the old key's
    row, or it stays there beside the new one."""
    return any(
        isinstance(old.get(c.name), str | bytes)
        and new.get(c.name) is not UNCHANGED
        and old[c.name] != new.get(c.name)
        for c in relation.columns
        if c.key
    )


def _time(micros: int) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=micros)


class Decoder:
    """Feeds on messages in stream order and yields finished transactions (see the module docstring)."""

    def __init__(self) -> None:
        self.relations: dict[int, Relation] = {}
        self.current: Transaction | None = None

    def _relation(self, oid: int) -> Relation:
        found = self.relations.get(oid)
        if found is None:
            raise PipelineError(f"pgoutput: a change to relation {oid} came before its Relation message")
        return found

    def _add(self, op: str, relation: Relation, values: dict[str, object], index: int | None = None) -> None:
        if self.current is None:
            raise PipelineError("pgoutput: a change outside a transaction")
        if index is None:  # a message's place (a key-changing update's delete shares its update's)
            changes = self.current.changes
            index = changes[-1].index + 1 if changes else 0
        self.current.changes.append(Change(op, relation, values, index))

    def feed(self, message: bytes) -> Transaction | None:  # noqa: C901
        """Take one message; the transaction it finished (a Commit), else None."""
        r = _Reader(bytes(message))
        kind = r.byte()
        if kind == "B":
            final_lsn, micros, xid = r.take("!Q"), r.take("!q"), r.take("!I")
            self.current = Transaction(xid, final_lsn, _time(micros))
        elif kind == "C":
            r.take("!B")
            _commit_lsn, end_lsn, micros = r.take("!Q"), r.take("!Q"), r.take("!q")
            done, self.current = self.current, None
            if done is None:
                raise PipelineError("pgoutput: a Commit without its Begin")
            done.end_lsn, done.commit_time = end_lsn, _time(micros)
            return done
        elif kind == "R":
            oid, namespace, name = r.take("!I"), r.string(), r.string()
            r.take("!B")  # replica identity setting
            columns = []
            for _ in range(r.take("!h")):
                flags, column, type_oid = r.take("!B"), r.string(), r.take("!I")
                r.take("!i")  # type modifier
                columns.append(Column(column, type_oid, bool(flags & 1)))
            self.relations[oid] = Relation(oid, namespace, name, tuple(columns))
        elif kind == "I":
            relation = self._relation(r.take("!I"))
            r.byte()  # 'N'
            self._add(INSERT, relation, r.tuple(relation))
        elif kind == "U":
            relation = self._relation(r.take("!I"))
            marker, old = r.byte(), {}
            if marker in ("K", "O"):  # the old key, or the whole old row (REPLICA IDENTITY FULL)
                old = r.tuple(relation)
                marker = r.byte()
            new = r.tuple(relation)
            for name, value in new.items():  # an unchanged TOAST value: the old row has it, if it sent
                if value is UNCHANGED and isinstance(old.get(name), str | bytes):  # it (an old key's
                    new[name] = old[name]  # other columns come as NULL: not the value)
            if key_changed(relation, old, new):  # the old key's row is gone: a delete, in the same place
                keys = {c.name for c in relation.columns if c.key}
                self._add(DELETE, relation, {n: v if n in keys else None for n, v in old.items()})
                self._add(UPDATE, relation, new, self.current.changes[-1].index)  # type: ignore[union-attr]
            else:
                self._add(UPDATE, relation, new)
        elif kind == "D":
            relation = self._relation(r.take("!I"))
            r.byte()  # 'K' (the key) or 'O' (the whole old row, REPLICA IDENTITY FULL)
            self._add(DELETE, relation, r.tuple(relation))
        elif kind == "T":
            count = r.take("!I")
            r.take("!B")
            for _ in range(count):
                self._add(TRUNCATE, self._relation(r.take("!I")), {})
        # 'Y' (type), 'O' (origin), 'M' (message): nothing a row needs
        return None

    def transactions(self, messages: Iterable[bytes]) -> Iterable[Transaction]:
        for message in messages:
            done = self.feed(message)
            if done is not None:
                yield done
