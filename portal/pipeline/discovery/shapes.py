"""What Test connection and discovery answer, for every node kind: the verdict, the datasets
(tables or data files) with their columns, and which column a run can follow as a watermark.

A column is a watermark candidate when a run can follow it as a cursor and it grows with new rows:
a timestamp or a date, or an integer the database numbers (identity, serial, auto_increment, a
single integer primary key). Django-free: the portal's topology app asks through the kinds'
`Probe` (`probes.probe_for`) and says only who may ask and with what.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from portal.pipeline import landing

DISCOVERY_MAX_FILES = 200  # data files, Iceberg tables and SQLite tables listed
DISCOVERY_MAX_ENTRIES = 20_000  # files and folders looked at under a files node's root
DISCOVERY_MAX_COLUMNS = 5000  # JDBC: columns read from the catalog, all tables together

# Column types a watermark can follow as a cursor (ordered, compared with < and >, and exact), as
# the dialects shown name them (PostgreSQL, MariaDB, SQLite, Spark, Iceberg, Arrow): integers and
# moments, the whole name matched. Not `numeric`/`decimal` (a money column grows with nothing) nor
# a float (inexact); `point`, `interval`, `struct<a:bigint>`, an array (`integer[]`, `timestamp[]`)
# or a range (`int4range`, `daterange`) are not ordered although they begin with such a word. A
# type's modifiers may follow: a width or precision (`int(11)`, `datetime(6)`), `unsigned`, a time
# zone (`timestamp with time zone`) or Arrow's unit (`timestamp[us, tz=UTC]`, `date32[day]`).
_MODIFIERS = r"(?:\s*\(\s*\d+\s*\))?(?:\s+(?:unsigned|zerofill|with(?:out)?\s+time\s+zone))*"
_ARROW_UNIT = r"(?:\[[^\[\]]+\])?"  # a unit, never the empty brackets of an array
_INTEGER = re.compile(
    r"(?:u?int(?:2|4|8|16|32|64)?|tinyint|smallint|mediumint|bigint|integer|\w*serial\d?|long)" + _MODIFIERS,
    re.IGNORECASE,
)
_MOMENT = re.compile(
    r"(?:timestamp(?:_ntz|_ltz|tz)?(?:_ns)?|datetime2?|smalldatetime|date(?:32|64)?)"
    + _ARROW_UNIT
    + _MODIFIERS,
    re.IGNORECASE,
)


@dataclass
class ConnectionResult:
    ok: bool
    message: str
    schemas: list[str] = field(default_factory=list)


@dataclass
class Column:
    name: str
    type: str
    key_position: int = 0  # 1-based place in the table's primary key (0: not in it)
    identity: bool = False  # filled by the database: identity, serial, auto_increment
    candidate: str = ""  # why it is a watermark candidate ("" if it is not one)
    in_file: bool = False  # a data file's column: the files' modification time is the watermark

    @property
    def watermark_suitable(self) -> bool:
        """Of a type a cursor can follow: an integer, a date or a timestamp."""
        kind = self.type.strip()
        return bool(_INTEGER.fullmatch(kind) or _MOMENT.fullmatch(kind))

    @property
    def watermark_verdict(self) -> str:
        """The one thing discovery's "Watermark?" column says of this column."""
        if self.in_file:  # a files source follows the files' modification time, never a column
            moment = _MOMENT.fullmatch(self.type.strip())
            return (
                f"no: a {_moment_word(self.type)}; files follow their modification time" if moment else "no"
            )
        return f"yes: {self.candidate}" if self.candidate else "no"

    @property
    def watermark_candidate(self) -> bool:
        return bool(self.candidate)

    @property
    def in_primary_key(self) -> bool:
        return self.key_position > 0


@dataclass
class Dataset:
    """A table (`schema.table`) or a data file (its path under the root; `modified` its mtime)."""

    name: str
    columns: list[Column]
    note: str = ""
    modified: float | None = None

    @property
    def watermark_columns(self) -> list[Column]:
        """Candidates first, then the other columns of a type a cursor can follow."""
        suitable = [column for column in self.columns if column.watermark_suitable]
        return [c for c in suitable if c.candidate] + [c for c in suitable if not c.candidate]

    @property
    def watermark_candidates(self) -> list[Column]:
        return [column for column in self.columns if column.candidate]

    @property
    def watermark_candidate_names(self) -> list[str]:
        return [column.name for column in self.watermark_candidates]

    @property
    def primary_key(self) -> list[str]:
        keyed = sorted((c for c in self.columns if c.key_position), key=lambda c: c.key_position)
        return [column.name for column in keyed]

    @property
    def watermark_source(self) -> str:
        """A files source's watermark is the files' modification time; a table's is a column."""
        return "file_modification_time" if self.modified is not None else "column"

    @property
    def modified_at(self) -> dt.datetime | None:
        if self.modified is None:
            return None
        return dt.datetime.fromtimestamp(self.modified, dt.UTC)


def mark_candidates(columns: list[Column]) -> list[Column]:
    """Watermark candidates of a table, from its catalog: columns the database fills in increasing
    order (identity, serial, auto_increment, a single integer primary key such as SQLite's rowid
    alias) and moments (timestamps, dates), which an incremental extract can follow."""
    single_key = sum(1 for column in columns if column.key_position) == 1
    for column in columns:
        kind = column.type.strip()
        if _INTEGER.fullmatch(kind) and column.identity:
            column.candidate = "identity column"  # also serial and auto_increment
        elif _INTEGER.fullmatch(kind) and single_key and column.key_position:
            column.candidate = "integer primary key"
        elif _MOMENT.fullmatch(kind):
            column.candidate = _moment_word(kind)
    return columns


def _moment_word(kind: str) -> str:
    """`date` for a day (SQL's date, Arrow's date32/date64), else `timestamp`."""
    return "date" if re.match(r"^date(?:32|64)?(?:\[\w+\])?$", kind.strip(), re.I) else "timestamp"


@dataclass
class Discovery:
    ok: bool
    message: str
    datasets: list[Dataset] = field(default_factory=list)
    truncated: bool = False


@dataclass(frozen=True)
class Asking:
    """One question to a node, with what the portal decided before it: the node's name and
    properties, the login to use (the node's own, else typed for the test), the timeout, the
    portal's own databases no connection may land in, a user-made node's bounds, and
    FLOWPORT_DATA_DIR (a relative path is under it)."""

    name: str
    properties: dict[str, Any]
    timeout: int
    data_dir: str
    portal: Sequence[landing.Landing] = ()
    bounds: Any = None
    user: str = ""
    password: str = ""

    @property
    def what(self) -> str:
        return f"data node '{self.name}'"


class Unsupported(Exception):
    """The portal cannot ask this node (its URL or its database); the message says which can."""


def failure(error: BaseException) -> str:
    """A refusal or the driver's own message, whatever the driver, at most 1,000 characters."""
    if isinstance(error, landing.LandingRefused):  # its message says "refused" itself
        text = str(error)
        return text if "refused" in text.lower() else f"Refused: {text}"
    if isinstance(error, Unsupported):
        return str(error)
    return f"{type(error).__name__}: {str(error).strip()}"[:1000]


@dataclass(frozen=True)
class Probe:
    """How the portal tests and discovers a node of one kind. Neither raises: every failure is a
    result with the reason."""

    test: Callable[[Asking], ConnectionResult]
    discover: Callable[[Asking], Discovery]
