"""The bulk pgoutput decoder gives, in columns, exactly what the message-by-message decoder gives:
on what a real server sends (every kind of value, old rows, a schema change, a truncate, small and
large transactions) read in batches of every size, and on malformed messages it names the fault."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from portal.pipeline.cdc import pg as cdc_pg
from portal.pipeline.cdc.pgoutput import UNCHANGED, Decoder
from portal.pipeline.cdc.pgoutput_batch import BatchDecoder
from portal.pipeline.errors import PipelineError
from tests.pg_logical import logical_pg  # noqa: F401 (fixture)


def _by_message(messages: list[bytes]) -> list[tuple[Any, ...]]:
    """(xid, end, table, op, index, values, unchanged) of every change, by the reference decoder."""
    found = []
    for t in Decoder().transactions(messages):
        for c in t.changes:
            if c.op == "t":
                found.append((t.xid, t.end_lsn, c.relation.qualified, "t", c.index, None, False))
                continue
            values = tuple(None if v is UNCHANGED else v for v in c.values.values())
            unchanged = any(v is UNCHANGED for v in c.values.values())
            found.append((t.xid, t.end_lsn, c.relation.qualified, c.op, c.index, values, unchanged))
    return found


def _in_bulk(messages: list[bytes], size: int) -> list[tuple[Any, ...]]:
    decoder, found = BatchDecoder(), []
    for start in range(0, len(messages), size):
        done = decoder.feed(messages[start : start + size])
        at = {c.seq: c for c in done.committed}
        for rows in done.rows:
            columns = [v.to_pylist() for v in rows.values]
            for i in range(len(rows)):
                c = at[rows.seq[i]]
                values = tuple(col[i] for col in columns)
                op = rows.op[i].as_py()
                found.append(
                    (
                        c.xid,
                        c.end_lsn,
                        rows.relation.qualified,
                        op,
                        int(rows.index[i]),
                        values,
                        bool(rows.unchanged[i]),
                    )
                )
        for seq, relation in done.truncated:
            found.append((at[seq].xid, at[seq].end_lsn, relation.qualified, "t", None, None, False))
    assert not decoder.pending and not decoder.open
    return found


def _same(messages: list[bytes]) -> list[tuple[Any, ...]]:
    expected = _by_message(messages)

    def order(change: tuple[Any, ...]) -> tuple[Any, ...]:
        return (change[1], change[2], change[4] if change[4] is not None else -1)

    for size in (1, 2, 3, 7, 64, 5000):
        got = _in_bulk(messages, size)
        # A truncate's place is not kept in bulk; every change's is, and it is the reference's.
        assert sorted(got, key=order) == sorted(
            [(*c[:4], None, *c[5:]) if c[3] == "t" else c for c in expected], key=order
        ), size
    return expected


@pytest.fixture
def db(logical_pg: str) -> Iterator[psycopg.Connection]:  # noqa: F811
    name = f"bulk_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(logical_pg, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(logical_pg.rsplit("/", 1)[0] + f"/{name}", autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        yield conn
        conn.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = %s",
            (name,),
        )
    with psycopg.connect(logical_pg, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _messages(db: psycopg.Connection, slot: str) -> list[bytes]:
    upto = cdc_pg.flushed(db)
    batches = list(cdc_pg.peek_batches(db, slot, upto, None, size=100))
    flat = [m for batch in batches for m in batch]
    assert flat == [m for _, m in cdc_pg.peek(db, slot, upto, None)]
    return flat


def test_every_kind_of_value_reads_as_the_reference_reads_it(db):
    db.execute(
        "CREATE TABLE public.kinds (id int PRIMARY KEY, n numeric(20,6), big numeric, at timestamptz,"
        " day date, note text, raw bytea, doc jsonb, tags text[], ok boolean, f float8, big_text text)"
    )
    db.execute("CREATE TABLE public.other (k text PRIMARY KEY, v int)")
    cdc_pg.ensure(db, "fp_bulk", ["public.kinds", "public.other"], "node")
    tricky = "a, \"quoted\", 'single'\nnew line\ttab \\ back Zoë 日本 🎉"
    long = "x" * 300_000  # TOASTed: an update that leaves it alone does not send it
    db.execute(
        "INSERT INTO public.kinds VALUES (1, -12345678901234.123456, 1e-30, '2026-03-04 05:06:07.123456+02',"
        " '2026-03-04', %s, '\\x00ff10'::bytea, '{\"a\": [1, \"b,c\"]}', ARRAY['x', 'y,z', NULL, 'q\"'],"
        " true, 'NaN', %s)",
        (tricky, long),
    )
    db.execute("INSERT INTO public.kinds (id, note) VALUES (2, '')")  # empty text is not NULL
    with db.transaction():  # interleaved tables, a key change, small and large changes in one transaction
        db.execute("INSERT INTO public.other VALUES ('a', 1), ('b', NULL)")
        db.execute("UPDATE public.kinds SET id = 3, ok = false WHERE id = 1")  # old key sent
        db.execute("UPDATE public.other SET v = 2 WHERE k = 'a'")
        db.execute("UPDATE public.kinds SET ok = true WHERE id = 3")  # the long text is not sent
        db.execute("DELETE FROM public.other WHERE k = 'b'")
    for i in range(50):  # many small transactions
        db.execute("INSERT INTO public.other VALUES (%s, %s)", (f"s{i}", i))
    db.execute("ALTER TABLE public.other ADD COLUMN extra text")  # a new Relation message mid-stream
    db.execute("INSERT INTO public.other VALUES ('new', 9, 'more')")
    db.execute("ALTER TABLE public.kinds REPLICA IDENTITY FULL")
    db.execute(
        "UPDATE public.kinds SET ok = NULL WHERE id = 3"
    )  # the whole old row: the long text comes from it
    db.execute("TRUNCATE public.other")
    db.execute("INSERT INTO public.other VALUES ('after', 1, NULL)")
    db.execute(
        "INSERT INTO public.kinds (id) SELECT g FROM generate_series(10, 2000) g"
    )  # a large transaction
    db.execute("DELETE FROM public.kinds WHERE id > 10")

    expected = _same(_messages(db, "fp_bulk"))
    first = next(c for c in expected if c[2] == "public.kinds" and c[3] == "c")
    assert first[5][:9] == (
        "1",
        "-12345678901234.123456",
        "0.000000000000000000000000000001",
        "2026-03-04 03:06:07.123456+00",
        "2026-03-04",
        tricky,
        "\\x00ff10",
        '{"a": [1, "b,c"]}',
        '{x,"y,z",NULL,"q\\""}',
    )
    updates = [c for c in expected if c[2] == "public.kinds" and c[3] == "u"]
    # The long text is not sent by the updates under the default identity: not even by the one that
    # changed the key (its old key's other columns come as NULL, which is not the value), so both
    # are marked unchanged; under REPLICA IDENTITY FULL the old row carries it.
    assert [(u[5][0], u[6]) for u in updates] == [("3", True), ("3", True), ("3", False)]
    # The key change also deletes the old key, in the update's own place, just before it.
    moved = expected.index(next(c for c in expected if c[3] == "u" and c[2] == "public.kinds"))
    gone = expected[moved - 1]
    assert (gone[3], gone[4], gone[5][0], gone[5][1:]) == ("d", updates[0][4], "1", (None,) * 11)
    assert sum(c[3] == "d" and c[2] == "public.kinds" for c in expected[:moved]) == 1
    assert updates[1][5][11] is None and updates[2][5][11] == long
    assert any(c[3] == "t" for c in expected) and len(expected) > 4000


def _relation(oid: int = 1) -> bytes:
    columns = b"".join(
        bytes([flags]) + name + b"\0" + struct.pack("!Ii", 25, -1) for flags, name in ((1, b"id"), (0, b"v"))
    )
    return b"R" + struct.pack("!I", oid) + b"public\0t\0" + b"d" + struct.pack("!h", 2) + columns


def _begin(xid: int = 5) -> bytes:
    return b"B" + struct.pack("!QqI", 100, 0, xid)


def _commit(end: int = 200) -> bytes:
    return b"C" + struct.pack("!BQQq", 0, 100, end, 0)


def _insert(*values: bytes | None, oid: int = 1, count: int | None = None) -> bytes:
    body = b"".join(b"n" if v is None else b"t" + struct.pack("!i", len(v)) + v for v in values)
    return (
        b"I"
        + struct.pack("!I", oid)
        + b"N"
        + struct.pack("!h", len(values) if count is None else count)
        + body
    )


def test_hand_made_messages_decode_and_wait_for_their_commit():
    decoder = BatchDecoder()
    first = decoder.feed([_relation(), _begin(), _insert(b"1", None), _insert(b"2", b"two")])
    assert first.committed == [] and first.rows == []  # nothing until the Commit
    done = decoder.feed([_commit(), _begin(6), _insert(b"3", b"")])
    assert [c.xid for c in done.committed] == [5]
    assert [(r.values[0].to_pylist(), r.values[1].to_pylist(), r.index.tolist()) for r in done.rows] == [
        (["1", "2"], [None, "two"], [0, 1])
    ]
    last = decoder.feed([_commit(300)])
    assert [r.values[1].to_pylist() for r in last.rows] == [[""]] and last.committed[0].end_lsn == 300


@pytest.mark.parametrize(
    ("messages", "fault"),
    [
        ([_begin(), _insert(b"1", b"a")], "before its Relation message"),
        ([_relation(), _insert(b"1", b"a")], "outside a transaction"),
        ([_relation(), _commit()], "Commit without its Begin"),
        ([_relation(), _begin(), _begin()], "Begin inside a transaction"),
        ([_relation(), _begin(), _insert(b"1", b"a", b"b")], "sent 3 columns"),
        ([_relation(), _begin(), _insert(b"1", b"a")[:-1]], "cut short"),
        ([_relation(), _begin(), _insert(b"1", b"a") + b"x"], "longer than its columns"),
        ([_relation(), _begin(), _insert(b"1", b"\xff\xfe")], "not UTF-8"),
        (
            [_relation(), _begin(), _insert(b"1", b"a").replace(b"t\x00\x00\x00\x01a", b"q")],
            "unknown tuple value kind 'q'",
        ),
    ],
)
def test_a_malformed_stream_is_named_not_guessed(messages, fault):
    with pytest.raises(PipelineError, match=fault):
        BatchDecoder().feed(messages)
