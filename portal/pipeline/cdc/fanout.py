"""A change-data-capture flow with several destinations: one log, a position per destination.

A flow with several destinations compiles to one job per destination, each reading the flow's one
replication slot (:mod:`portal.pipeline.cdc.pg`) and each checking in its own position per table
(the state store keys watermarks by job). So a destination that fails keeps its last committed
position and its next run reads on from there, while the others go on from theirs and are never
sent a change twice. What they share is the slot: the server may free the log only up to the
lowest position over every destination's tables, else the failing destination's changes would be
gone. The worker hands each job the positions the *other* destinations' jobs have committed
(``JobSpec.extra[OTHERS_KEY]``: job name -> table -> position, ``""`` for none yet), and both
releases (the run's start and the acknowledgement after the publish) go through
:func:`release_point`. Positions only grow between resnapshots, so a reading older than the
release is never too high: at worst the log is released a little later.

The jobs run at the same time; PostgreSQL lets one session use a slot at a time (a peek or an
advance of a slot in use fails with "replication slot ... is active"), so each job holds a
session advisory lock named after the slot (:func:`hold`) while it reads or moves the slot.
A MariaDB binlog has no slot: each destination's job reads the binlog from its own position.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from portal.pipeline.cdc import pg
from portal.pipeline.cdc.snapshot import stream_position
from portal.pipeline.jobspec import JobSpec

OTHERS_KEY = "cdc_other_destinations"


def others(spec: JobSpec) -> dict[str, dict[str, str]]:
    """The other destinations' committed positions (job name -> table -> position or ``""``)."""
    found = spec.extra.get(OTHERS_KEY) or {}
    return {str(job): {str(t): str(p or "") for t, p in marks.items()} for job, marks in found.items()}


def release_point(spec: JobSpec, own: Mapping[str, str | None], tables: Iterable[str]) -> int | None:
    """The lowest log position every table of every destination has committed (``own``: this
    job's, by table), or None while one of them has none yet (it still needs the log from the
    slot's start, so nothing may be released)."""
    # A table whose snapshot in key chunks is under way keeps its stream position in front.
    marks: list[str | None] = [stream_position(own.get(t)) for t in tables]
    for theirs in others(spec).values():
        marks.extend(stream_position(mark) for mark in theirs.values())
    if not marks or not all(marks):
        return None
    found = pg.positions({str(i): m for i, m in enumerate(marks)})
    return min(found.values())


def others_hold_positions(spec: JobSpec) -> bool:
    """Whether another destination has a committed position (then the slot must not be dropped for
    this job's new snapshot: the others read on from it)."""
    return any(p for marks in others(spec).values() for p in marks.values())


def lock_key(slot: str) -> int:
    """The advisory lock's 64-bit key for a slot (stable across processes, unlike ``hash``)."""
    return int.from_bytes(hashlib.sha256(f"flowport-slot:{slot}".encode()).digest()[:8], "big", signed=True)


def hold(conn: Any, slot: str) -> None:
    """Take the slot's session advisory lock on ``conn`` (autocommit): held until the connection
    closes, waited for while another destination's job reads or moves the slot."""
    conn.execute("SELECT pg_advisory_lock(%s)", (lock_key(slot),))
