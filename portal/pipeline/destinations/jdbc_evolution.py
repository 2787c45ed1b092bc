"""A JDBC destination table follows its source's schema under ``schema.evolution.policy=evolve``.

The ``jdbc_publish`` step (:mod:`portal.pipeline.destinations.jdbc`, :mod:`portal.pipeline.destinations.jdbc_targets`)
moves a staging table into the target with ``INSERT ... SELECT`` by the staging table's column
names; a column the target lacks would fail it. With ``evolve`` the step first compares the two
tables in the database's own catalog and adds each missing column with the staging table's type,
and widens a target column whose staging type is wider (``integer`` -> ``bigint``, ``real`` ->
``double precision``, a longer ``varchar`` or ``text``, a decimal with more digits). SQLite stores
any integer in 64 bits and does not type its columns strictly: there only columns are added.

In PostgreSQL and SQLite this runs inside the step's transaction (their DDL is transactional); in
MySQL/MariaDB DDL commits at once, so it runs before the rows' transaction (adding a missing column
again is a no-op: a re-run of the step finds nothing to do).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from portal.pipeline.dialects import MYSQL, POSTGRESQL, SQLITE, Dialect

Run = Callable[[str, tuple[Any, ...]], Any]  # executes one statement, returns a DB-API cursor

_INTEGERS = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "integer": 4, "bigint": 5}
_FLOATS = {"real": 1, "float": 1, "double": 2, "double precision": 2}
_DECIMAL = re.compile(r"^(?:numeric|decimal)\((\d+),\s*(\d+)\)$")
_VARCHAR = re.compile(r"^(?:character varying|varchar)\((\d+)\)$")
_TEXTS = ("text", "mediumtext", "longtext")


def _normal(column_type: str) -> str:
    """``int(11) unsigned`` -> ``int``; ``NUMERIC(10, 2)`` -> ``numeric(10,2)``."""
    text = column_type.strip().lower().replace(" unsigned", "")
    text = re.sub(r"^(tinyint|smallint|mediumint|int|integer|bigint)\(\d+\)", r"\1", text)
    return re.sub(r"\s*,\s*", ",", text)


def wider(old: str, new: str) -> bool:
    """Whether column type ``new`` holds every value of ``old`` and is not the same type."""
    a, b = _normal(old), _normal(new)
    if a == b:
        return False
    for ranks in (_INTEGERS, _FLOATS):
        if a in ranks and b in ranks:
            return ranks[b] > ranks[a]
    da, db = _DECIMAL.match(a), _DECIMAL.match(b)
    if da and db:
        (p1, s1), (p2, s2) = map(int, da.groups()), map(int, db.groups())
        return s2 >= s1 and p2 - s2 >= p1 - s1
    va, vb = _VARCHAR.match(a), _VARCHAR.match(b)
    if va and (b in _TEXTS or (vb and int(vb.group(1)) > int(va.group(1)))):
        return True
    return a in _TEXTS and b in _TEXTS and _TEXTS.index(b) > _TEXTS.index(a)


def columns(dialect: Dialect, run: Run, table: str) -> list[tuple[str, str]]:
    """``[(name, column type), ...]`` of ``table`` from the database's catalog, in column order."""
    if dialect is POSTGRESQL:
        query = (
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
        )
        # the name quoted, as the publish step creates it (a mixed-case name is not folded)
        return [(r[0], r[1]) for r in run(query, (dialect.quote(table),)).fetchall()]
    if dialect is MYSQL:
        schema, _, name = table.rpartition(".")
        query = (
            "SELECT column_name, column_type FROM information_schema.columns "
            "WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ? "
            "ORDER BY ordinal_position"
        )
        return [(r[0], r[1]) for r in run(query, (schema, name)).fetchall()]
    return [
        (r[0], r[1] or "") for r in run("SELECT name, type FROM pragma_table_info(?)", (table,)).fetchall()
    ]


def evolve(dialect: Dialect, run: Run, target: str, staging: str) -> list[str]:
    """Add to ``target`` the columns of ``staging`` it lacks and widen the narrower ones; returns
    the statements run (none when the target already fits)."""
    have = {name.lower(): kind for name, kind in columns(dialect, run, target)}
    q = dialect.quote
    statements = []
    for name, kind in columns(dialect, run, staging):
        current = have.get(name.lower())
        if current is None:
            statements.append(f"ALTER TABLE {q(target)} ADD COLUMN {q(name)} {kind or 'TEXT'}")
        elif dialect is not SQLITE and wider(current, kind):
            change = "ALTER COLUMN {} TYPE" if dialect is POSTGRESQL else "MODIFY COLUMN {}"
            statements.append(f"ALTER TABLE {q(target)} {change.format(q(name))} {kind}")
    for statement in statements:
        run(statement, ())
    return statements
