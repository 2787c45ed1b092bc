"""Which tables a JDBC source reads: a whole schema, or part of one, as one dataset per table.

``source.jdbc.tables`` lists tables and table patterns, comma-separated. A pattern is a shell-style
glob (``*``, ``?``, ``[abc]``; :mod:`fnmatch`, case-sensitive): ``public.*`` is every table of schema
``public`` (dataset ``public.orders``, ``public.customers``, ...), ``orders_*`` every table of the
connection's default schema whose name starts so (PostgreSQL's ``current_schema()``, MySQL's
database of the URL, every SQLite table; dataset ``orders_2024`` as the name is written).
``source.jdbc.tables.exclude`` lists names or patterns taken out again (also how a run leaves out
a dataset whose earlier commit is unfinished, :mod:`portal.orchestration.state.recovery`).
Flowport's own staging tables (``fp_stg_*``) never match.

Each table is a dataset with its own watermark, planned, run and committed on its own. The portal
matches the patterns at save (a pattern matching nothing is refused) to show what they match then;
the worker matches them again at every run, so a table created since joins on the next run and a
dropped one is no longer planned (its watermark stays in the state store).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass

TABLES_KEY = "source.jdbc.tables"
EXCLUDE_KEY = "source.jdbc.tables.exclude"
OWN_TABLES = "fp_stg_*"
_GLOB = frozenset("*?[")
_PLAIN = re.compile(r"^[a-z_][a-z0-9_$]*$")  # a PostgreSQL identifier that needs no quotes


@dataclass(frozen=True)
class Table:
    """A table of the database: its schema, its name, and whether the schema is the default one."""

    schema: str
    name: str
    default_schema: bool = False

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name

    def written(self, qualified: bool, dialect: str) -> str:
        """The dataset's name as SQL names the table: on PostgreSQL a part other than a plain
        lower-case identifier is quoted (the server would fold ``WideCase`` to ``widecase``)."""
        parts = [self.schema, self.name] if qualified and self.schema else [self.name]
        if dialect == "postgresql":
            parts = [p if _PLAIN.match(p) else '"' + p.replace('"', '""') + '"' for p in parts]
        return ".".join(parts)


def is_pattern(entry: str) -> bool:
    return any(c in _GLOB for c in entry)


def has_patterns(entries: Iterable[str]) -> bool:
    return any(is_pattern(e) for e in entries)


def _matches(pattern: str, table: Table, dialect: str) -> str | None:
    """The dataset name ``table`` gets from ``pattern`` (None: no match)."""
    if fnmatch.fnmatchcase(table.name, OWN_TABLES):
        return None
    if "." in pattern:
        return table.written(True, dialect) if fnmatch.fnmatchcase(table.qualified, pattern) else None
    if table.default_schema and fnmatch.fnmatchcase(table.name, pattern):
        return table.written(False, dialect)
    return None


def matching(pattern: str, tables: Iterable[Table], dialect: str = "") -> list[str]:
    """The datasets one pattern matches, sorted."""
    return sorted({name for t in tables if (name := _matches(pattern, t, dialect)) is not None})


def resolve(entries: list[str], tables: Iterable[Table], exclude: list[str], dialect: str = "") -> list[str]:
    """The datasets of ``entries`` (names kept as written and in their order, then each pattern's
    matches, sorted, as SQL names them on ``dialect``), without duplicates and without what
    ``exclude`` names or matches (as written or as the catalog spells it)."""
    tables = list(tables)
    result: list[str] = []
    for entry in entries:
        for name in matching(entry, tables, dialect) if is_pattern(entry) else [entry]:
            if name not in result:
                result.append(name)
    return [n for n in result if not any(_excluded(n, x) for x in exclude)]


def _excluded(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name.replace('"', ""), pattern)


def catalog_query(dialect: str) -> str:
    """One query listing ``(schema, name, is_default)`` of every user table and view, in the
    dialect named (:mod:`portal.pipeline.dialects`; this module stays free of Spark for the portal).
    MySQL/MariaDB: only the connection's own database, as one connection there reaches every
    database of the server (:mod:`portal.pipeline.landing`)."""
    if dialect == "postgresql":
        return (
            "SELECT table_schema AS s, table_name AS t, "
            "CASE WHEN table_schema = current_schema() THEN 1 ELSE 0 END AS d "
            "FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') "
            "AND table_schema NOT LIKE 'pg\\_%'"
        )
    if dialect == "mysql":
        return (
            "SELECT table_schema AS s, table_name AS t, "
            "CASE WHEN table_schema = DATABASE() THEN 1 ELSE 0 END AS d "
            "FROM information_schema.tables WHERE table_schema = DATABASE()"
        )
    return (
        "SELECT 'main' AS s, name AS t, 1 AS d FROM sqlite_master "
        "WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    )
