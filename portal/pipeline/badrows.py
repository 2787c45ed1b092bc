"""Bad records set aside: the rows a CSV or JSON file source could not read.

Spark reads CSV and JSON in its PERMISSIVE mode with a corrupt-record column (:data:`BAD`): a row
that does not parse, has the wrong number of fields or holds a value its column's type cannot take
keeps its raw text there, and is left out of what the branches write.  The writes count the bad
rows on their own read (an observed metric, :data:`METRIC`); only when there are some does the task
read them again to describe them: the source file and line, the reason (``3 field(s), expected 2``,
``column 'amount' (double): 'abc' does not parse``, ``malformed JSON: …``), the raw record, the
job, execution and task.

Thresholds (job-wide keys): ``errors.max.count`` and ``errors.max.fraction`` (of the records read,
bad ones included).  The task fails when either limit is passed; with neither set, one bad record
fails it (nothing is set aside silently).  Within the limits the rows are written, as JSON lines,
to ``_errors/<execution>-<task>.jsonl`` in the task output of every file branch, so the publish
that moves the data moves them beside it (``<publish dir>/<dataset>/_errors/``), exactly once, and
a failed task leaves none; a run past the limits (or one without a file branch) writes them to the
job's err folder (``<work dir>/err/<job>/<execution>/<task>/bad_records.jsonl``) instead, which the
publish never touches.  Names starting with ``_`` are hidden from the files source and from Spark,
so a later hop reading the dataset never reads them as data.

Line numbers are counted on the driver, in the files that had bad rows, for local files (a Hadoop
URI's rows say ``line: null``): meant for the few rows a threshold lets through.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from portal.pipeline import fs
from portal.pipeline.errors import ConfigError, QualityCheckError
from portal.pipeline.properties import Properties

BAD = "fp_bad_record"  # Spark's columnNameOfCorruptRecord: the raw text of a row it could not read
SOURCE_FILE = "fp_source_file"
METRIC = "fp_bad_records"
FOLDER = "_errors"
MAX_COUNT, MAX_FRACTION = "errors.max.count", "errors.max.fraction"
SHOWN = 3  # bad rows quoted in a failure's message
LINE_LOOKUP_ROWS = 100_000  # beyond this many bad rows, lines are not looked up


@dataclass(frozen=True)
class BadRecords:
    """How a source's extract marks the rows it could not read: their raw text in :data:`BAD`,
    their file in :data:`SOURCE_FILE`; ``fields`` are the data columns, ``delimiter`` a CSV's."""

    format: str
    fields: tuple[T.StructField, ...]
    delimiter: str = ","

    @property
    def keep(self) -> Column:
        return F.col(BAD).isNull()

    def metric(self) -> Column:
        return F.sum(F.when(F.col(BAD).isNotNull(), 1).otherwise(0))

    def reason(self, raw: str, parsed: dict[str, Any]) -> str:
        """Why the row was set aside, from its raw text and what Spark made of it."""
        if self.format == "csv":
            return _csv_reason(raw, parsed, self.fields, self.delimiter)
        return _json_reason(raw, parsed, self.fields)


@dataclass(frozen=True)
class Limits:
    """``errors.max.count`` / ``errors.max.fraction``; neither set: no bad record is tolerated."""

    max_count: int | None
    max_fraction: float | None

    @classmethod
    def of(cls, props: Properties) -> Limits:
        count = props.get_int(MAX_COUNT)
        fraction = props.get_float(MAX_FRACTION)
        if count is not None and count < 0:
            raise ConfigError(f"{props.describe(MAX_COUNT)} must be 0 or more, got {count}")
        if fraction is not None and not 0 <= fraction <= 1:
            raise ConfigError(f"{props.describe(MAX_FRACTION)} must be between 0 and 1, got {fraction}")
        if count is None and fraction is None:
            count = 0
        return cls(count, fraction)

    def passed(self, bad: int, read: int) -> str | None:
        """Which limit ``bad`` records out of ``read`` pass (None: within them)."""
        if self.max_count is not None and bad > self.max_count:
            return f"more than {MAX_COUNT}={self.max_count}"
        if self.max_fraction is not None and read and bad / read > self.max_fraction:
            return f"{bad / read:.2%} of the {read:,} record(s) read, more than {MAX_FRACTION}={self.max_fraction}"
        return None


def describe(df: DataFrame, spec: BadRecords, context: dict[str, Any]) -> list[dict[str, Any]]:
    """The bad rows of ``df`` (the extract, helper columns included), described: a second read,
    made only when the writes counted some."""
    data = [f.name for f in spec.fields if f.name in df.columns]  # a schema policy may drop some
    frame = df.where(F.col(BAD).isNotNull()).select(*[F.col(f"`{n}`") for n in data], SOURCE_FILE, BAD)
    rows: list[dict[str, Any]] = []
    for row in frame.toLocalIterator():
        values = row.asDict()
        raw = values.pop(BAD)
        source = values.pop(SOURCE_FILE)
        rows.append(
            {
                **context,
                "source_file": _plain(source),
                "line": None,
                "reason": spec.reason(raw, values),
                "record": raw,
            }
        )
    if len(rows) <= LINE_LOOKUP_ROWS:
        _add_lines(rows)
    return rows


def check(limits: Limits, rows: list[dict[str, Any]], read: int, urn: str, where: str) -> None:
    """Fail the task (naming the first rows and where all of them are) past a limit."""
    passed = limits.passed(len(rows), read)
    if passed is None:
        return
    shown = "; ".join(position(r) for r in rows[:SHOWN])
    more = f" and {len(rows) - SHOWN:,} more" if len(rows) > SHOWN else ""
    raise QualityCheckError(
        f"{len(rows):,} bad record(s) in dataset '{urn}', {passed}: {shown}{more} "
        f"(all of them in {where}; raise {MAX_COUNT} or {MAX_FRACTION} to set them aside)"
    )


def position(row: dict[str, Any]) -> str:
    name = str(row.get("source_file") or "?").rsplit("/", 1)[-1]
    line = f" line {row['line']}" if row.get("line") else ""
    return f"{name}{line}: {row['reason']}"


def to_json_lines(rows: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows)


def set_aside(path: str, base: str) -> bool:
    """Whether a task-output file (``path`` under the task-output folder ``base``) holds bad
    records set aside (``_errors/``) rather than the dataset's rows: the commit publishes it to
    its own folder, and a dataset's outputs never count it."""
    relative = str(path)[len(base) :].lstrip("/\\")
    return relative.startswith(FOLDER + "/")


def file_name(execution_id: int, task_id: str) -> str:
    return f"{execution_id}-{task_id}.jsonl"


def write(path: str, rows: list[dict[str, Any]]) -> int:
    """Write the rows as JSON lines (locally or through Hadoop); the file's size."""
    text = to_json_lines(rows)
    fs.write_text(path, text)
    return len(text.encode("utf-8"))


def _plain(uri: str) -> str:
    """A ``file:`` URI as the plain path it stands for; any other URI as it is."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _add_lines(rows: list[dict[str, Any]]) -> None:
    """Each row's line in its (local) file: the n-th row whose record starts with a text gets the
    n-th line holding that text (rows come in file order)."""
    by_file: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_file[row["source_file"]].append(row)
    for path, found in by_file.items():
        if not fs.is_local(path):
            continue
        wanted: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in found:
            wanted[str(row["record"]).split("\n", 1)[0].rstrip("\r")].append(row)
        try:
            for number, text in _lines(fs.local_path(path)):
                waiting = wanted.get(text)
                if waiting:
                    waiting.pop(0)["line"] = number
        except OSError:
            continue


def _lines(path: str) -> Iterator[tuple[int, str]]:
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            yield number, raw.decode("utf-8", errors="replace").rstrip("\r\n")


def _type(field: T.StructField) -> str:
    return field.dataType.simpleString()


def _csv_reason(raw: str, parsed: dict[str, Any], fields: tuple[T.StructField, ...], sep: str) -> str:
    try:
        records = list(csv.reader(io.StringIO(raw), delimiter=sep or ",", strict=True))
    except csv.Error as error:
        return f"malformed CSV: {error}"
    tokens = records[0] if len(records) == 1 else [t for r in records for t in r]
    if len(tokens) != len(fields):
        return f"{len(tokens)} field(s), expected {len(fields)}"
    for field, token in zip(fields, tokens, strict=True):
        if token != "" and parsed.get(field.name) is None:
            return f"column '{field.name}' ({_type(field)}): '{token[:80]}' does not parse"
    return "malformed CSV record"


def _json_reason(raw: str, parsed: dict[str, Any], fields: tuple[T.StructField, ...]) -> str:
    try:
        value = json.loads(raw)
    except ValueError as error:
        message = getattr(error, "msg", str(error))
        column = getattr(error, "colno", None)
        return f"malformed JSON: {message}" + (f" at column {column}" if column else "")
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}, not an object"
    for field in fields:
        given = value.get(field.name)
        if given is not None and parsed.get(field.name) is None:
            return f"column '{field.name}' ({_type(field)}): {json.dumps(given)[:80]} does not parse"
    return "malformed JSON record"
