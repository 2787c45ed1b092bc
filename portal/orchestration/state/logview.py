"""Searching a job log and filtering it by level, for the log page.

Worker lines (`joblogs.JobLog.write`) and the driver's log4j lines both read
`<time> <LEVEL> …`. A line with no level of its own (a stack trace's `at …`,
a wrapped message) belongs to the line above it, so filtering for ERROR keeps
a whole traceback. Python's logging levels are not reused: log4j's WARN and
FATAL are not Python names, and only an order of four is needed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.http import QueryDict
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")
_RANK = {name: rank for rank, name in enumerate(LEVELS)}
_ALIASES = {"TRACE": "DEBUG", "WARNING": "WARN", "FATAL": "ERROR", "CRITICAL": "ERROR", "SEVERE": "ERROR"}
# The level is one of the first few words (after a date and a time at most).
_LEVEL = re.compile(r"^(?:\S+\s+){0,2}(TRACE|DEBUG|INFO|WARN(?:ING)?|ERROR|FATAL|CRITICAL|SEVERE)\b")
MAX_QUERY = 200


@dataclass
class LogFilter:
    query: str = ""
    level: str = ""  # "" = every line; else this level and above
    errors: list[str] = field(default_factory=list)

    @classmethod
    def from_params(cls, params: QueryDict) -> LogFilter:
        result = cls(query=params.get("q", "").strip()[:MAX_QUERY], level=params.get("level", "").upper())
        if result.level and result.level not in _RANK:
            result.errors.append(f"level must be one of {', '.join(LEVELS)}, got {result.level!r}.")
            result.level = ""
        return result

    @property
    def active(self) -> bool:
        return bool(self.query or self.level)


@dataclass
class FilteredLog:
    html: SafeString  # the kept lines, escaped, matches in <mark>, one span per line
    shown: int
    total: int


def line_level(line: str, previous: str = "INFO") -> str:
    found = _LEVEL.match(line)
    if not found:
        return previous
    name = found.group(1)
    return _ALIASES.get(name, name)


def apply(text: str, wanted: LogFilter) -> FilteredLog:
    """The lines of `text` at or above the wanted level that contain the
    query (case-insensitive), marked up for a <pre>."""
    lines = text.splitlines()
    floor = _RANK.get(wanted.level, 0)
    needle = wanted.query.lower()
    pattern = re.compile(re.escape(wanted.query), re.IGNORECASE) if wanted.query else None
    kept: list[str] = []
    level = "INFO"
    for line in lines:
        level = line_level(line, level)
        if _RANK[level] < floor or (needle and needle not in line.lower()):
            continue
        body: str = escape(line)
        if pattern is not None:
            body = _mark(line, pattern)
        kept.append(f'<span class="log-line level-{level.lower()}">{body}</span>')
    return FilteredLog(mark_safe("\n".join(kept)), len(kept), len(lines))  # noqa: S308 - every piece escaped above


def _mark(line: str, pattern: re.Pattern[str]) -> str:
    parts: list[str] = []
    last = 0
    for hit in pattern.finditer(line):
        parts.append(escape(line[last : hit.start()]))
        parts.append(f"<mark>{escape(hit.group(0))}</mark>")
        last = hit.end()
    parts.append(escape(line[last:]))
    return "".join(parts)
