"""Decode ``pgoutput`` row changes in bulk: a batch of messages into Arrow columns per table.

:class:`portal.pipeline.cdc.pgoutput.Decoder` turns each message into Python objects, a dict per row
and a str per value: measured by tests/bench/bench_cdc.py, that Python work (not reading the slot)
was most of a CDC run's time. Here a batch of messages (thousands, stream order) is joined into one
buffer and every change row of a table is walked at once with numpy, column by column: where each
value starts, how long it is, whether it is NULL or an unchanged TOAST value (``u``); the values
are then gathered into one Arrow string array per column. Python still looks at each Begin, Commit,
Relation and Truncate message (a few per transaction), never at a row or a value.

It yields what :class:`~portal.pipeline.cdc.pgoutput.Decoder` yields, in columns: the same values (text
as the server prints it, checked to be UTF-8), the same place of each change in its transaction,
and an update's unchanged TOAST value is filled from the old row when the log carries it (REPLICA
IDENTITY FULL). Rows are handed out only once their transaction's Commit has been read; the rows of
the transaction still open at the end of a batch wait for a later one, so a caller never sees half a
transaction. A malformed message is an error naming it, never a guess.
"""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from portal.pipeline.cdc.pgoutput import EPOCH, Column, Relation
from portal.pipeline.errors import PipelineError

_I, _U, _D, _B, _C, _R, _T = (ord(k) for k in "IUDBCRT")
_TEXT, _NULL, _UNCHANGED, _BINARY = (ord(k) for k in "tnub")
_PAD = b"\0" * 8  # reading a length past a message's last byte stays inside the buffer
_OPS = pa.array(["c", "u", "d"], pa.string())


@dataclass(frozen=True)
class Committed:
    """A transaction whose Commit was read: ``seq`` numbers transactions in stream order."""

    seq: int
    xid: int
    end_lsn: int
    commit_time: dt.datetime


@dataclass
class Rows:
    """Change rows of one relation, in stream order: ``values`` in the relation's column order
    (NULL for a NULL and for an unchanged TOAST value, which ``unchanged`` marks), ``op`` c/u/d,
    ``seq`` the transaction's number and ``index`` the change's place in its transaction."""

    relation: Relation
    values: list[pa.Array]
    op: pa.Array
    seq: np.ndarray
    index: np.ndarray
    unchanged: np.ndarray

    def __len__(self) -> int:
        return len(self.seq)

    def slice(self, start: int, stop: int) -> Rows:
        return Rows(
            self.relation,
            [v.slice(start, stop - start) for v in self.values],
            self.op.slice(start, stop - start),
            self.seq[start:stop],
            self.index[start:stop],
            self.unchanged[start:stop],
        )


@dataclass
class Decoded:
    """What one batch finished: the transactions committed in it, their rows (every row of them,
    in stream order) and the relations they truncated ``(seq, relation)``."""

    committed: list[Committed] = field(default_factory=list)
    rows: list[Rows] = field(default_factory=list)
    truncated: list[tuple[int, Relation]] = field(default_factory=list)


def _time(micros: int) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=micros)


def _be32(d: np.ndarray, at: np.ndarray) -> np.ndarray:
    b = d[at[:, None] + np.arange(4)].astype(np.int64)
    return (b[:, 0] << 24) | (b[:, 1] << 16) | (b[:, 2] << 8) | b[:, 3]


class BatchDecoder:
    """Feeds on batches of messages in stream order (see the module docstring)."""

    def __init__(self) -> None:
        self.relations: dict[int, Relation] = {}
        self.seq = 0  # the number of the last transaction begun
        self.open = False  # a transaction is under way
        self.count = 0  # changes so far in the open transaction (its next change's place)
        self.pending: list[Rows] = []  # rows of the open transaction
        self.pending_truncated: list[tuple[int, Relation]] = []
        self.begin: tuple[int, int] = (0, 0)  # the open transaction's xid and Begin time

    def feed(self, messages: list[bytes]) -> Decoded:
        out = Decoded()
        if not messages:
            return out
        lengths = np.fromiter(map(len, messages), np.int64, len(messages))
        if (lengths == 0).any():
            raise PipelineError("pgoutput: an empty message")
        starts = np.zeros(len(messages), np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        buf = b"".join(messages) + _PAD
        d = np.frombuffer(buf, np.uint8)
        kinds = d[starts]
        first = 0
        for r in np.flatnonzero(kinds == _R).tolist():  # a relation's columns change only here
            self._segment(buf, d, starts[first:r], lengths[first:r], kinds[first:r], out)
            self._relation(buf, int(starts[r]))
            first = r + 1
        self._segment(buf, d, starts[first:], lengths[first:], kinds[first:], out)
        return out

    def _relation(self, buf: bytes, at: int) -> None:
        at += 1
        (oid,) = struct.unpack_from("!I", buf, at)
        at += 4
        names = []
        for _ in range(2):
            end = buf.index(b"\0", at)
            names.append(buf[at:end].decode())
            at = end + 1
        at += 1  # replica identity setting
        (count,) = struct.unpack_from("!h", buf, at)
        at += 2
        columns = []
        for _ in range(count):
            flags = buf[at]
            end = buf.index(b"\0", at + 1)
            name = buf[at + 1 : end].decode()
            (type_oid,) = struct.unpack_from("!I", buf, end + 1)
            at = end + 9  # type oid and type modifier
            columns.append(Column(name, type_oid, bool(flags & 1)))
        self.relations[oid] = Relation(oid, names[0], names[1], tuple(columns))

    def _segment(  # noqa: C901, PLR0915
        self,
        buf: bytes,
        d: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        kinds: np.ndarray,
        out: Decoded,
    ) -> None:
        """Messages without a Relation among them: transactions read one by one, rows all at once."""
        n = len(starts)
        if n == 0:
            return
        is_change = (kinds == _I) | (kinds == _U) | (kinds == _D)
        steps = is_change.astype(np.int64)  # how many changes each message adds to its transaction
        seq0, open0, count0 = self.seq, self.open, self.count
        begins: list[int] = []  # positions of Begin messages in the segment
        bounds: list[int] = []  # positions of Begin and Commit messages
        released = 0  # rows of transactions up to this number are committed
        truncated: list[tuple[int, Relation]] = []
        for i in np.flatnonzero(~is_change).tolist():
            kind, at = int(kinds[i]), int(starts[i])
            if kind == _B:
                if self.open:
                    raise PipelineError("pgoutput: a Begin inside a transaction")
                _final, micros, xid = struct.unpack_from("!QqI", buf, at + 1)
                self.seq, self.open, self.begin = self.seq + 1, True, (xid, micros)
                begins.append(i)
                bounds.append(i)
            elif kind == _C:
                if not self.open:
                    raise PipelineError("pgoutput: a Commit without its Begin")
                _flags, _commit, end_lsn, micros = struct.unpack_from("!BQQq", buf, at + 1)
                out.committed.append(Committed(self.seq, self.begin[0], end_lsn, _time(micros)))
                self.open, released = False, self.seq
                bounds.append(i)
            elif kind == _T:
                if not self.open:
                    raise PipelineError("pgoutput: a change outside a transaction")
                (count,) = struct.unpack_from("!I", buf, at + 1)
                steps[i] = count
                oids = struct.unpack_from(f"!{count}I", buf, at + 6)
                truncated += [(self.seq, self._known(o)) for o in oids]
            # 'Y' (type), 'O' (origin), 'M' (message): nothing a row needs
        # Each change's transaction: the Begin before it, else the one open when the segment began.
        changes = np.flatnonzero(is_change)
        taken = np.cumsum(steps) - steps  # changes before each message in the segment
        if len(changes):
            begun = np.searchsorted(np.array(begins, np.int64), changes)
            latest = np.searchsorted(np.array(bounds, np.int64), changes) - 1
            begin_bound = kinds[np.array(bounds, np.int64)] == _B
            inside = (
                np.where(latest >= 0, begin_bound[np.maximum(latest, 0)], open0)
                if bounds
                else np.full(len(changes), open0)
            )
            if not inside.all():
                raise PipelineError("pgoutput: a change outside a transaction")
            seq = seq0 + begun
            base = np.where(begun > 0, taken[np.array([*begins, 0], np.int64)[begun - 1]], -count0)
            index = taken[changes] - base
            rows = self._rows(d, starts[changes], lengths[changes], kinds[changes], seq, index)
        else:
            rows = []
        total = int(steps.sum())
        self.count = (total - int(taken[begins[-1]])) if begins else count0 + total
        if not self.open:
            self.count = 0
        # Hand out the rows (and truncates) of committed transactions; keep the open one's.
        if released:
            out.rows += self.pending
            out.truncated += self.pending_truncated
            self.pending, self.pending_truncated = [], []
        for r in rows:
            cut = int(np.searchsorted(r.seq, released, side="right"))
            if cut:
                out.rows.append(r.slice(0, cut) if cut < len(r) else r)
            if cut < len(r):
                self.pending.append(r.slice(cut, len(r)))
        for number, relation in truncated:
            (out.truncated if number <= released else self.pending_truncated).append((number, relation))

    def _known(self, oid: int) -> Relation:
        found = self.relations.get(oid)
        if found is None:
            raise PipelineError(f"pgoutput: a change to relation {oid} came before its Relation message")
        return found

    def _rows(
        self,
        d: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        kinds: np.ndarray,
        seq: np.ndarray,
        index: np.ndarray,
    ) -> list[Rows]:
        """The change messages' rows, one :class:`Rows` per relation."""
        oids = _be32(d, starts + 1)
        found = []
        for oid in np.unique(oids).tolist():
            picked = np.flatnonzero(oids == oid)
            found.append(
                self._relation_rows(
                    self._known(oid),
                    d,
                    starts[picked],
                    lengths[picked],
                    kinds[picked],
                    seq[picked],
                    index[picked],
                )
            )
        return found

    def _relation_rows(
        self,
        relation: Relation,
        d: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        kinds: np.ndarray,
        seq: np.ndarray,
        index: np.ndarray,
    ) -> Rows:
        at = starts + 5  # after the kind and the relation's oid
        marker = d[at]
        at = at + 1
        # An update may carry the old key ('K') or the whole old row ('O', REPLICA IDENTITY FULL)
        # before its new row ('N'); a delete carries one of them, an insert the new row.
        keyed = (marker == ord("K")) | (marker == ord("O"))
        if not np.where(
            kinds == _I, marker == ord("N"), np.where(kinds == _D, keyed, keyed | (marker == ord("N")))
        ).all():
            raise PipelineError(f"pgoutput: a change to {relation.qualified} has an unknown tuple marker")
        old = np.flatnonzero((kinds == _U) & keyed)
        old_cols = None
        if len(old):
            old_cols, after = self._tuple(relation, d, at[old])
            if (d[after] != ord("N")).any():
                raise PipelineError(f"pgoutput: an update of {relation.qualified} has no new row")
            at[old] = after + 1
        cols, at = self._tuple(relation, d, at)
        if (at != starts + lengths).any():
            raise PipelineError(f"pgoutput: a change to {relation.qualified} is longer than its columns")
        moved = self._key_moved(relation, d, old, old_cols, cols)
        values, unchanged = [], np.zeros(len(starts), bool)
        for j, (kind, begin, size) in enumerate(cols):
            if old_cols is not None:  # an unchanged TOAST value: the old row has it, if it sent it
                o_kind, o_begin, o_size = old_cols[j]  # (an old key's other columns come as NULL)
                fill = old[(kind[old] == _UNCHANGED) & (o_kind == _TEXT)]
                if len(fill):
                    where = np.searchsorted(old, fill)
                    kind, begin, size = kind.copy(), begin.copy(), size.copy()
                    kind[fill], begin[fill], size[fill] = o_kind[where], o_begin[where], o_size[where]
            unchanged |= kind == _UNCHANGED
            values.append(_strings(relation, relation.columns[j].name, d, kind, begin, size))
        op = _OPS.take(pa.array(np.where(kinds == _I, 0, np.where(kinds == _U, 1, 2))))
        found = Rows(relation, values, op, seq, index, unchanged)
        return found if moved is None else _with_deletes(found, *moved)

    @staticmethod
    def _key_moved(
        relation: Relation,
        d: np.ndarray,
        old: np.ndarray,
        old_cols: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None,
        cols: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    ) -> tuple[np.ndarray, list[pa.Array | None]] | None:
        """The updates (rows of ``old``) that moved their row to another key, and the old key's
        values: as :func:`portal.pipeline.cdc.pgoutput.key_changed` says, one column at a time."""
        if old_cols is None:
            return None
        keyed = [j for j, c in enumerate(relation.columns) if c.key]
        moved = np.zeros(len(old), bool)
        olds: dict[int, pa.Array] = {}
        for j in keyed:
            o_kind, o_begin, o_size = old_cols[j]
            kind, begin, size = (a[old] for a in cols[j])
            before = _strings(relation, relation.columns[j].name, d, o_kind, o_begin, o_size)
            after = _strings(relation, relation.columns[j].name, d, kind, begin, size)
            differs = pc.fill_null(pc.not_equal(before, after), True).to_numpy(zero_copy_only=False)
            moved |= (o_kind == _TEXT) & (kind != _UNCHANGED) & differs
            olds[j] = before
        if not moved.any():
            return None
        picked = pa.array(np.flatnonzero(moved))
        return old[moved], [olds[j].take(picked) if j in olds else None for j in range(len(cols))]

    @staticmethod
    def _tuple(
        relation: Relation, d: np.ndarray, at: np.ndarray
    ) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], np.ndarray]:
        """Walk one tuple of every row at once: per column ``(kind, value start, value size)``, and
        where the tuples end."""
        count = (d[at].astype(np.int64) << 8) | d[at + 1]
        if (count != len(relation.columns)).any():
            sent = int(count[count != len(relation.columns)][0])
            raise PipelineError(
                f"pgoutput: {relation.qualified} sent {sent} columns, its relation has {len(relation.columns)}"
            )
        at = at + 2
        cols = []
        for _ in relation.columns:
            kind = d[at]
            valued = (kind == _TEXT) | (kind == _BINARY)
            if not (valued | (kind == _NULL) | (kind == _UNCHANGED)).all():
                bad = chr(int(kind[~(valued | (kind == _NULL) | (kind == _UNCHANGED))][0]))
                raise PipelineError(f"pgoutput: unknown tuple value kind {bad!r}")
            size = np.zeros(len(at), np.int64)
            if valued.any():
                size[valued] = _be32(d, at[valued] + 1)
            cols.append((kind, at + 5, size))
            at = at + np.where(valued, 5 + size, 1)
            if len(at) and int(at.max()) > len(d) - len(_PAD):
                raise PipelineError(f"pgoutput: a change to {relation.qualified} is cut short")
        return cols, at


def _strings(
    relation: Relation, name: str, d: np.ndarray, kind: np.ndarray, begin: np.ndarray, size: np.ndarray
) -> pa.Array:
    """One column's values as an Arrow string array (NULL where no text was sent)."""
    if (kind == _BINARY).any():
        raise PipelineError(
            f"pgoutput: {relation.qualified}.{name} came in binary form, which is not asked for"
        )
    valid = kind == _TEXT
    size = np.where(valid, size, 0)
    offsets = np.zeros(len(kind) + 1, np.int64)
    np.cumsum(size, out=offsets[1:])
    total = int(offsets[-1])
    if total:
        gather = np.repeat(begin - offsets[:-1], size) + np.arange(total, dtype=np.int64)
        data = pa.py_buffer(d[gather].tobytes())
    else:
        data = pa.py_buffer(b"")
    nulls = None
    if not valid.all():
        nulls = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    array = pa.Array.from_buffers(
        pa.large_string(), len(kind), [nulls, pa.py_buffer(offsets.tobytes()), data]
    )
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        raise PipelineError(
            f"pgoutput: {relation.qualified}.{name} sent a value that is not UTF-8 (the database's encoding?)"
        ) from None
    return pc.cast(array, pa.string()) if total < 2**31 else array


def _with_deletes(rows: Rows, at: np.ndarray, keys: list[pa.Array | None]) -> Rows:
    """``rows`` with a delete of the old key just before each update at ``at`` (its place shared):
    a destination merging by key removes the row the update moved away from."""
    n, m = len(rows), len(at)
    before = np.searchsorted(at, np.arange(n), side="right")  # deletes placed before each row
    order = np.empty(n + m, np.int64)
    order[np.arange(n) + before] = np.arange(n)
    order[at + np.arange(m)] = n + np.arange(m)
    take = pa.array(order)
    values = [
        pa.concat_arrays([v, k if k is not None else pa.nulls(m, v.type)]).take(take)
        for v, k in zip(rows.values, keys, strict=True)
    ]
    op = pa.concat_arrays([rows.op, _OPS.take(pa.array(np.full(m, 2)))]).take(take)
    return Rows(
        rows.relation,
        values,
        op,
        np.concatenate([rows.seq, rows.seq[at]])[order],
        np.concatenate([rows.index, rows.index[at]])[order],
        np.concatenate([rows.unchanged, np.zeros(m, bool)])[order],
    )
