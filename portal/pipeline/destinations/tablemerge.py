"""Merge and history (SCD type 2) of a run's rows into a stored table, in Arrow.

A files destination and an Iceberg table have no ``UPDATE``: a merge or a history rewrites the
dataset from what is stored and what the run brings, and the publish step swaps the result in
whole (:mod:`portal.pipeline.destinations.files_replace`, :mod:`portal.pipeline.destinations.iceberg`). The rules are the JDBC
destination's (:mod:`portal.pipeline.destinations.jdbc_modes`): the run's rows win over stored ones, within a
run the latest by the order column (then the last read); a row whose delete column is true removes
(merge) or closes (history) its key.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from portal.pipeline.destinations.write_modes import IS_CURRENT, VALID_FROM, VALID_TO

_POS = "__fp_pos"


def latest_per_key(tables: list[pa.Table], keys: list[str], order: str | None) -> pa.Table | None:
    """The rows with one row per key: the latest by ``order`` (then the last read) wins."""
    tables = [t for t in tables if t is not None]
    if not tables:
        return None
    rows = pa.concat_tables(tables, promote_options="permissive")
    rows = rows.append_column(_POS, pa.array(range(len(rows)), pa.int64()))
    sort = [(order, "ascending")] if order and order in rows.column_names else []
    rows = rows.sort_by([*sort, (_POS, "ascending")])
    rows = rows.set_column(rows.column_names.index(_POS), _POS, pa.array(range(len(rows)), pa.int64()))
    last = rows.group_by(keys).aggregate([(_POS, "max")])[f"{_POS}_max"]
    return rows.filter(pc.is_in(rows[_POS], value_set=last)).drop_columns([_POS])


def _deleted(rows: pa.Table, delete_column: str | None) -> pa.ChunkedArray | None:
    if not delete_column or delete_column not in rows.column_names:
        return None
    return pc.fill_null(pc.cast(rows[delete_column], pa.bool_()), False)


def _aligned(existing: pa.Table, new: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Both tables in one schema (new columns added, types widened), so keys compare."""
    both = pa.concat_tables([existing, new], promote_options="permissive")
    return both.slice(0, len(existing)), both.slice(len(existing))


def _rows_without(existing: pa.Table, new: pa.Table, keys: list[str]) -> pa.Table:
    """``existing`` less the rows whose key is among ``new``'s (a hash anti-join on the keys only)."""
    left = existing.select(keys).append_column(_POS, pa.array(range(len(existing)), pa.int64()))
    kept = left.join(new.select(keys).group_by(keys).aggregate([]), keys=keys, join_type="left anti")
    return existing.take(pc.take(kept[_POS], pc.sort_indices(kept[_POS])))


def merge(
    existing: pa.Table | None, new: pa.Table, keys: list[str], order: str | None, delete_column: str | None
) -> pa.Table:
    """The stored rows with the run's merged in (see the module docstring)."""
    latest = latest_per_key([new], keys, order)
    assert latest is not None
    if existing is not None and len(existing):
        existing, latest = _aligned(existing, latest)
        result = pa.concat_tables([_rows_without(existing, latest, keys), latest])
    else:
        result = latest
    deleted = _deleted(result, delete_column)
    return result if deleted is None else result.filter(pc.invert(deleted))


def _with_history(rows: pa.Table, now: dt.datetime) -> pa.Table:
    stamp = pa.timestamp("us", tz="UTC")
    rows = rows.drop_columns([c for c in (VALID_FROM, VALID_TO, IS_CURRENT) if c in rows.column_names])
    return (
        rows.append_column(VALID_FROM, pa.array([now] * len(rows), stamp))
        .append_column(VALID_TO, pa.nulls(len(rows), stamp))
        .append_column(IS_CURRENT, pa.array([True] * len(rows), pa.bool_()))
    )


def history(
    existing: pa.Table | None,
    new: pa.Table,
    keys: list[str],
    order: str | None,
    delete_column: str | None,
    now: dt.datetime,
) -> pa.Table:
    """SCD type 2 of the stored versions and the run's rows (see the module docstring)."""
    latest = latest_per_key([new], keys, order)
    assert latest is not None
    if existing is None or not len(existing):
        deleted = _deleted(latest, delete_column)
        return _with_history(latest if deleted is None else latest.filter(pc.invert(deleted)), now)
    existing, latest = _aligned(existing, _with_history(latest, now))
    values = [
        c for c in latest.column_names if c not in (*keys, VALID_FROM, VALID_TO, IS_CURRENT, delete_column)
    ]
    current: dict[tuple[Any, ...], tuple[int, tuple[Any, ...]]] = {}
    flags = existing[IS_CURRENT].to_pylist()
    for index, row in enumerate(existing.select([*keys, *values]).to_pylist()):
        if flags[index]:
            current[tuple(row[k] for k in keys)] = (index, tuple(row[c] for c in values))
    deleted = _deleted(latest, delete_column)
    gone = deleted.to_pylist() if deleted is not None else [False] * len(latest)
    closed: set[int] = set()
    added: list[int] = []
    for index, row in enumerate(latest.select([*keys, *values]).to_pylist()):
        key = tuple(row[k] for k in keys)
        stored = current.get(key)
        if stored is not None and (gone[index] or stored[1] != tuple(row[c] for c in values)):
            closed.add(stored[0])
            stored = None
        if stored is None and not gone[index]:
            added.append(index)
    valid_to = existing[VALID_TO].to_pylist()
    for index in closed:
        valid_to[index], flags[index] = now, False
    stamp = existing.schema.field(VALID_TO).type
    existing = existing.set_column(
        existing.column_names.index(VALID_TO), VALID_TO, pa.array(valid_to, stamp)
    ).set_column(existing.column_names.index(IS_CURRENT), IS_CURRENT, pa.array(flags, pa.bool_()))
    return pa.concat_tables([existing, latest.take(pa.array(added, pa.int64()))])
