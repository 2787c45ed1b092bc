"""The SQL of a JDBC destination's write modes, per dialect (:mod:`portal.pipeline.destinations.write_modes`).

Each statement runs inside the publish transaction of the ``jdbc_publish`` step, beside the
publish marker (:mod:`portal.pipeline.destinations.jdbc`, :mod:`portal.pipeline.destinations.jdbc_targets`), so a mode
is published whole or not at all and never twice:

* ``overwrite``: a PostgreSQL target that is only its rows is replaced by the staging table itself
  (:func:`swap`: dropped, the staging table renamed to it); otherwise the target is emptied (``TRUNCATE`` in PostgreSQL, transactional there;
  ``DELETE`` in MySQL/MariaDB and SQLite, whose ``TRUNCATE`` would commit) and the run's rows go in.
  No reader sees the table half-filled: after a ``DELETE`` readers see the old rows until the
  commit; PostgreSQL's ``TRUNCATE`` (chosen because it does not rewrite ten million rows) makes
  them wait for the commit instead.
* ``merge``: an upsert (:meth:`~portal.pipeline.dialects.Dialect.move_rows`), then the keys whose
  latest row has the delete column true are deleted. On PostgreSQL 15 and later a run that brings
  at least a tenth of the target's rows is merged by one ``MERGE`` instead (:func:`pg_merge`).
* ``history``: the current version of every key whose latest row differs (NULL-safe) or is deleted
  is closed, then a new current version is inserted for every key without one. Statements hold no
  parameters: the publish time is a literal in the dialect's form.
* a backfill appending to a table deletes the rows of its watermark range first
  (:func:`range_delete`), so it replaces what it reads again instead of adding it twice.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
from psycopg import sql

from portal.pipeline import pgconn
from portal.pipeline.destinations.write_modes import IS_CURRENT, VALID_FROM, VALID_TO
from portal.pipeline.dialects import MYSQL, POSTGRESQL, Dialect


def clear(dialect: Dialect, target: str) -> str:
    if dialect is POSTGRESQL:
        return f"TRUNCATE {dialect.quote(target)}"
    return f"DELETE FROM {dialect.quote(target)}"  # noqa: S608


def history_columns(dialect: Dialect, target: str) -> list[str]:
    """What a new history target gets besides the staging table's columns."""
    stamp = {"postgresql": "timestamptz", "mysql": "DATETIME(6) NULL"}.get(dialect.name, "TEXT")
    kinds = ((VALID_FROM, stamp), (VALID_TO, stamp), (IS_CURRENT, "BOOLEAN"))
    q = dialect.quote
    if dialect.name == "sqlite":
        return [f"ALTER TABLE {q(target)} ADD COLUMN {q(n)} {t}" for n, t in kinds]
    return [f"ALTER TABLE {q(target)} " + ", ".join(f"ADD COLUMN {q(n)} {t}" for n, t in kinds)]


def _now(dialect: Dialect, now: dt.datetime) -> str:
    utc = now.astimezone(dt.UTC)
    if dialect is POSTGRESQL:
        return f"TIMESTAMPTZ '{utc.isoformat()}'"
    text = utc.replace(tzinfo=None).isoformat(sep=" ")
    return f"TIMESTAMP '{text}'" if dialect is MYSQL else f"'{text}'"


def latest(
    dialect: Dialect, staging_tables: list[str], columns: list[str], keys: list[str], order: str | None
) -> str:
    """The run's rows, one per key (the latest by ``order``), as a derived table's query."""
    q = dialect.quote
    names = ", ".join(q(c) for c in columns)
    union = " UNION ALL ".join(f"SELECT {names} FROM {q(s)}" for s in staging_tables)  # noqa: S608
    by = f" ORDER BY {q(order)} DESC" if order and order in columns else ""
    window = f"ROW_NUMBER() OVER (PARTITION BY {', '.join(q(k) for k in keys)}{by})"
    return f"SELECT {names} FROM (SELECT {names}, {window} AS fp_rn FROM ({union}) fp_u) fp_r WHERE fp_rn = 1"  # noqa: S608


def _deleted(dialect: Dialect, column: str | None, alias: str = "fp_s") -> str:
    if not column:
        return "1=0"
    ref = f"{alias}.{dialect.quote(column)}"
    return f"COALESCE({ref}, FALSE)" if dialect is POSTGRESQL else f"COALESCE({ref}, 0) <> 0"


def _differs(dialect: Dialect, left: str, right: str) -> str:
    if dialect is POSTGRESQL:
        return f"{left} IS DISTINCT FROM {right}"
    if dialect is MYSQL:
        return f"NOT ({left} <=> {right})"
    return f"{left} IS NOT {right}"


def _target(dialect: Dialect, target: str) -> tuple[str, str]:
    """(the table as a statement names it, how its columns are qualified)."""
    q = dialect.quote
    if dialect is POSTGRESQL:
        return f"{q(target)} AS fp_t", "fp_t"
    return q(target), q(target)


def _match(dialect: Dialect, qual: str, keys: list[str]) -> str:
    q = dialect.quote
    return " AND ".join(f"{qual}.{q(k)} = fp_s.{q(k)}" for k in keys)


def merge_deletes(
    dialect: Dialect, target: str, staging_tables: list[str], columns: list[str], keys: list[str],
    order: str | None, delete_column: str | None,
) -> list[str]:  # fmt: skip
    """After the upsert: the keys whose latest row of the run is a delete go."""
    if not delete_column or delete_column not in columns:
        return []
    named, qual = _target(dialect, target)
    rows = latest(dialect, staging_tables, columns, keys, order)
    return [
        f"DELETE FROM {named} WHERE EXISTS (SELECT 1 FROM ({rows}) fp_s WHERE "  # noqa: S608
        f"{_match(dialect, qual, keys)} AND {_deleted(dialect, delete_column)})"
    ]


def history(
    dialect: Dialect, target: str, staging_tables: list[str], columns: list[str], keys: list[str],
    order: str | None, delete_column: str | None, now: dt.datetime,
) -> list[str]:  # fmt: skip
    """Close the changed and deleted keys' current versions, then add the new current versions."""
    q = dialect.quote
    named, qual = _target(dialect, target)
    rows = latest(dialect, staging_tables, columns, keys, order)
    values = [c for c in columns if c not in keys and c != delete_column]
    changed = " OR ".join(_differs(dialect, f"{qual}.{q(c)}", f"fp_s.{q(c)}") for c in values) or "1=0"
    stamp = _now(dialect, now)
    current = f"{qual}.{q(IS_CURRENT)} = TRUE"
    close = (
        f"UPDATE {named} SET {q(VALID_TO)} = {stamp}, {q(IS_CURRENT)} = FALSE WHERE {current} AND EXISTS "  # noqa: S608
        f"(SELECT 1 FROM ({rows}) fp_s WHERE {_match(dialect, qual, keys)} AND "
        f"(({changed}) OR {_deleted(dialect, delete_column)}))"
    )
    names = ", ".join(q(c) for c in columns)
    picked = ", ".join(f"fp_s.{q(c)}" for c in columns)
    inner = f"{q(target)} fp_c"
    match = " AND ".join(f"fp_c.{q(k)} = fp_s.{q(k)}" for k in keys)
    add = (
        f"INSERT INTO {q(target)} ({names}, {q(VALID_FROM)}, {q(VALID_TO)}, {q(IS_CURRENT)}) "  # noqa: S608
        f"SELECT {picked}, {stamp}, NULL, TRUE FROM ({rows}) fp_s WHERE NOT ({_deleted(dialect, delete_column)}) "
        f"AND NOT EXISTS (SELECT 1 FROM {inner} WHERE fp_c.{q(IS_CURRENT)} = TRUE AND {match})"
    )
    return [close, add]


def range_delete(dialect: Dialect, target: str, column: str, low: str | None, high: str | None) -> str | None:
    """A backfill's range of the target (``low`` exclusive, ``high`` inclusive), as the source reads it."""
    q = dialect.quote
    bounds = [
        f"{q(column)} > {dialect.literal(low)}" if low else "",
        f"{q(column)} <= {dialect.literal(high)}" if high else "",
    ]
    where = " AND ".join(b for b in bounds if b)
    return f"DELETE FROM {q(target)} WHERE {where}" if where else None  # noqa: S608


# An overwrite of a PostgreSQL table that is nothing but its rows (as the publish creates it: no
# index, constraint, trigger, rule, grant, comment, view or child, the staging table's very columns)
# takes the staging table itself: the target is dropped and the staging table renamed to it in the
# publish transaction, so ten million rows are not copied again. Any of those present, the rows are
# copied after a TRUNCATE instead, and the table keeps what was defined on it.
_SWAPPABLE = """
WITH t AS (SELECT * FROM pg_class WHERE oid = %(target)s::regclass),
     s AS (SELECT * FROM pg_class WHERE oid = %(staging)s::regclass)
SELECT t.relnamespace = s.relnamespace AND t.relowner = s.relowner AND t.reltablespace = s.reltablespace
   AND t.relkind = 'r' AND s.relkind = 'r' AND t.relpersistence = 'p' AND s.relpersistence = 'p'
   AND t.relacl IS NULL AND t.reloptions IS NULL AND NOT t.relhasindex AND NOT t.relhastriggers
   AND NOT t.relhasrules AND NOT t.relrowsecurity AND NOT t.relispartition AND NOT t.relhassubclass
   AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conrelid = t.oid OR c.confrelid = t.oid)
   AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.refobjid = t.oid AND d.classid = 'pg_rewrite'::regclass)
   AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = t.oid OR i.inhparent = t.oid)
   AND NOT EXISTS (SELECT 1 FROM pg_description e WHERE e.objoid = t.oid)
   AND NOT EXISTS (SELECT 1 FROM pg_publication_rel p WHERE p.prrelid = t.oid)
   AND NOT EXISTS (SELECT 1 FROM pg_statistic_ext x WHERE x.stxrelid = t.oid)
   AND (SELECT array_agg(ROW(attname, atttypid, atttypmod, attnotnull, atthasdef, attidentity, attgenerated,
                            attcollation) ORDER BY attnum)
          FROM pg_attribute WHERE attrelid = t.oid AND attnum > 0 AND NOT attisdropped)
     = (SELECT array_agg(ROW(attname, atttypid, atttypmod, attnotnull, atthasdef, attidentity, attgenerated,
                            attcollation) ORDER BY attnum)
          FROM pg_attribute WHERE attrelid = s.oid AND attnum > 0 AND NOT attisdropped)
FROM t, s
"""


def swappable(conn: Any, target: str, staging: str) -> bool:
    """Whether an overwrite of ``target`` (as ``to_regclass`` reads it) may rename ``staging`` to it."""
    row = conn.execute(_SWAPPABLE, {"target": target, "staging": staging}).fetchone()
    return bool(row and row[0])


def swap(target: str, staging: str) -> list[Any]:
    """The target dropped and the staging table renamed to it (same schema, checked before)."""
    bare = target.rpartition(".")[2].strip('"')
    return [
        sql.SQL("DROP TABLE {}").format(pgconn.table_ident(target)),
        sql.SQL("ALTER TABLE {} RENAME TO {}").format(pgconn.table_ident(staging), sql.Identifier(bare)),
    ]


# A run this large against the target's rows is merged by a join, not key by key (pg_merge).
MERGE_SHARE = 0.1


def pg_merge(
    conn: psycopg.Connection, target: str, staging: str, columns: list[str], keys: list[str],
    order: str | None, rows: int,
) -> None:  # fmt: skip
    """Merge one staging table into a PostgreSQL target by key, the latest row per key winning.

    ``INSERT … ON CONFLICT DO UPDATE`` looks each staged key up in the target's index and locks
    the row it finds before it decides: measured by tests/bench/bench_write_modes.py, 2.5 times an
    append when a whole run of 10 M rows comes again with 1 % changed, where PostgreSQL 15's
    ``MERGE`` joins the two tables in one plan at about the append's cost. A small run against a
    large target keeps the upsert (its index look-ups are the plan a join would pick anyway). A key
    another writer inserts while the ``MERGE`` runs makes it fail on the unique index: it is then
    undone (a savepoint) and the upsert, which waits for such keys and updates them, runs instead."""
    upsert = POSTGRESQL.move_rows(target, staging, columns, keys, order)
    if conn.info.server_version < 150000 or rows < MERGE_SHARE * _estimated_rows(conn, target):
        conn.execute(upsert)
        return
    # The staging table's statistics, or the planner, taking it for a few hundred rows, probes the
    # target key by key (15.2 s for 10 M rows, 8.9 s by a merge join once analyzed; the ANALYZE 0.16 s).
    conn.execute(sql.SQL("ANALYZE {}").format(pgconn.table_ident(staging)))
    try:
        with conn.transaction():
            conn.execute(_merge(conn, target, staging, columns, keys, order))
    except psycopg.errors.UniqueViolation:
        conn.execute(upsert)


def _estimated_rows(conn: psycopg.Connection, target: str) -> float:
    """The planner's count of the target's rows (0 when never counted: a new table)."""
    found = conn.execute(
        "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (POSTGRESQL.quote(target),)
    ).fetchone()
    return max(0.0, float(found[0])) if found else 0.0


def _merge(
    conn: psycopg.Connection,
    target: str,
    staging: str,
    columns: list[str],
    keys: list[str],
    order: str | None,
) -> str:
    """The ``MERGE``: a stored row is rewritten only when the run's row differs from it, compared
    as the target's row type byte for byte (``*<>``: no equality operator needed, json included;
    the target's own columns compared with themselves), as the upsert compares."""
    q = POSTGRESQL.quote
    stored = [
        str(r[0])
        for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0"
            " AND NOT attisdropped ORDER BY attnum",
            (q(target),),
        ).fetchall()
    ]
    names = ", ".join(q(c) for c in columns)
    key_list = ", ".join(q(k) for k in keys)
    latest = f", {q(order)} DESC" if order else ""
    source = f"SELECT DISTINCT ON ({key_list}) {names} FROM {q(staging)} ORDER BY {key_list}{latest}"  # noqa: S608
    match = " AND ".join(f"fp_t.{q(k)} = fp_s.{q(k)}" for k in keys)
    staged = set(columns)
    image = ", ".join(f"fp_s.{q(c)}" if c in staged else f"fp_t.{q(c)}" for c in stored)
    others = [c for c in columns if c not in keys]
    update = ", ".join(f"{q(c)} = fp_s.{q(c)}" for c in others)
    matched = (
        f"WHEN MATCHED AND fp_t.* *<> ROW({image})::{q(target)} THEN UPDATE SET {update}"
        if others
        else "WHEN MATCHED THEN DO NOTHING"
    )
    values = ", ".join(f"fp_s.{q(c)}" for c in columns)
    return (
        f"MERGE INTO {q(target)} AS fp_t USING ({source}) AS fp_s ON {match} {matched} "  # noqa: S608
        f"WHEN NOT MATCHED THEN INSERT ({names}) VALUES ({values})"
    )
