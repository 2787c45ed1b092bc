"""Files source: CSV, JSON lines, Parquet, ORC or Avro on a local path or any Hadoop URI.

Datasets: each top-level folder under ``source.files.path`` (or under the folder below
it that ``source.files.folder`` names: an upstream flow's own output, ``<flowGroup>/<flowName>``)
is a dataset whose ``dataset.urn`` is the folder name (``source.files.dataset.level=1``, the
default; restrict with ``source.files.datasets``), or the root itself is one dataset
(``source.files.dataset.level=0``, urn = ``dataset.urn`` or the root's base name).

Watermark: ``<mtime ms, 15 digits>:<path relative to the dataset folder>``.  Files are ordered by
modification time, then name, so several files sharing a timestamp are all read exactly once.  A
run reads the files with low < watermark <= expected high, where expected high is the largest
watermark listed at planning time; files are assumed immutable once written (write elsewhere and
rename in).  ``source.files.settle.seconds`` leaves out files modified in the last N seconds, for
writers that cannot rename.  New files are split into consecutive ranges of at most
``source.files.workunit.max.bytes`` (default 1 GiB) / ``source.files.workunit.max.files``.
Inferred CSV integers are ``bigint`` (as JDBC and JSON give them); ``source.schema`` says otherwise.
``source.files.glob`` keeps only the files whose name matches (``*-b0.*``: branch 0 of a fork that
published several branches to one folder).

Backfill bounds (``JobSpec.backfill``) are written in the same form, or shorter: ``<mtime ms>`` alone
(any number of digits) or an ISO-8601 time (``2024-05-01T00:00:00Z``, naive = UTC) stands for a
whole millisecond, so ``{"low": "2024-05-01T00:00:00Z", "high": "2024-05-02T00:00:00Z"}`` selects
the files modified after the first instant up to and including the second; the full
``<ms>:<path>`` form cuts between files of the same millisecond by name.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import os
import re
import time
from dataclasses import replace
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from portal.pipeline import badrows, fs, node_relative
from portal.pipeline.confinement import ConfinementError, real_inside
from portal.pipeline.errors import ConfigError, PipelineError
from portal.pipeline.sources.base import Extraction, Source
from portal.pipeline.workunits import WorkUnit

FORMATS = {
    "csv": "csv",
    "json": "json",
    "jsonl": "json",
    "parquet": "parquet",
    "orc": "orc",
    "avro": "org.apache.spark.sql.avro.AvroFileFormat",  # in spark-sql since Spark 4.0, by class name
}


_MS = re.compile(r"^(?P<ms>\d+)(:(?P<name>.*))?$", re.DOTALL)


def file_watermark(info: fs.FileInfo) -> str:
    return f"{info.mtime_ms:015d}:{info.relative}"


def watermark_key(value: str) -> tuple[int, int, str]:
    """Sort key of a files watermark or backfill bound (ValueError if it is neither).

    ``<ms>:<path>`` -> ``(ms, 0, path)``; ``<ms>`` or an ISO-8601 time -> ``(ms, 1, "")``, which sorts
    after every file of that millisecond (a bound covering the whole millisecond).
    """
    text = value.strip()
    match = _MS.match(text)
    if match:
        name = match.group("name")
        return (int(match.group("ms")), 0, name) if name is not None else (int(match.group("ms")), 1, "")
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"'{value}' is not a files watermark (<mtime ms>:<path>, <mtime ms> or an ISO-8601 time)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return (int(moment.timestamp() * 1000), 1, "")


class FileSource(Source):
    """See the module docstring for keys and semantics."""

    def _format(self) -> str:
        # The allowed names and the refusal's message are the property schema's (checked at save too).
        self.props.require("source.files.format")
        return FORMATS[self.props.get_choice("source.files.format") or ""]

    def _datasets(self, root: str) -> list[tuple[str, str]]:
        level = self.props.get_int("source.files.dataset.level", 1)
        if level == 0:
            urn = self.props.get("dataset.urn") or os.path.basename(root.rstrip("/")) or "files"
            return [(urn, root)]
        if level != 1:
            raise ConfigError(
                "source.files.dataset.level must be 0 (root is one dataset) or 1 (one per folder)"
            )
        wanted = self.props.get_list("source.files.datasets")
        names = wanted or fs.list_dirs(root)
        return [(name, self._inside(fs.join(root, name), root, f"dataset folder '{name}'")) for name in names]

    @staticmethod
    def _inside(path: str, root: str, what: str) -> str:
        """``path`` as read: a local path resolved to its real path inside the node's real root (a
        symlink out of the node is refused before Spark sees it); a Hadoop URI, which Hadoop lists
        below the root by construction, as it is."""
        if not fs.is_local(path):
            return path
        return real_inside(fs.local_path(path), fs.local_path(root), f"source.files.path: {what}")

    def _root(self) -> str:
        """The folder whose sub-folders are the datasets: the node's root, or the folder below it
        the flow names (``source.files.folder``, an upstream flow's own output), resolved inside
        the root before anything under it is listed."""
        root = self.props.require("source.files.path")
        folder = (self.props.get("source.files.folder") or "").strip().strip("/")
        if not folder:
            return root
        return self._inside(fs.join(root, folder), root, f"source.files.folder '{folder}'")

    def get_work_units(self) -> list[WorkUnit]:
        self.props.require("source.files.path")
        self._format()  # fail early on an unknown format
        refused = node_relative.problems(self.props)
        if refused:  # the worker's guard refuses these first; the pipeline trusts no caller
            raise ConfinementError("; ".join(refused))
        node_relative.reader_options(self.props, self.props.require("source.files.path"))
        root = self._root()  # a file option leading out, a folder out: refused before any read
        settle_ms = int((self.props.get_float("source.files.settle.seconds", 0.0) or 0.0) * 1000)
        max_bytes = self.props.get_int("source.files.workunit.max.bytes", 1 << 30) or (1 << 30)
        max_files = self.props.get_int("source.files.workunit.max.files", 0) or 0
        cutoff = int(time.time() * 1000) - settle_ms if settle_ms else None
        units: list[WorkUnit] = []
        for urn, folder in self._datasets(root):
            if not self.wanted(urn):
                continue
            low = self.previous_watermark(urn)
            try:
                low_key, high_key = self._bounds(urn, low)
            except ValueError as exc:
                units.append(WorkUnit(urn, low, None, error=str(exc), payload={"folder": folder}))
                continue
            pattern = self.props.get("source.files.glob")
            listed = [
                f
                for f in fs.list_files(folder)
                if (cutoff is None or f.mtime_ms <= cutoff)
                and (not pattern or fnmatch.fnmatchcase(f.relative.rsplit("/", 1)[-1], pattern))
            ]
            candidates = sorted(((file_watermark(f), f) for f in listed), key=lambda p: p[0])
            new = [
                (wm, f)
                for wm, f in candidates
                if (low_key is None or watermark_key(wm) > low_key)
                and (high_key is None or watermark_key(wm) <= high_key)
            ]
            if not new:
                units.append(WorkUnit(urn, low, low, empty=True, payload={"folder": folder}))
                continue
            ranges: list[list[tuple[str, fs.FileInfo]]] = [[]]
            new = [
                (wm, replace(f, path=self._inside(f.path, folder, f"file '{urn}/{f.relative}'")))
                for wm, f in new
            ]
            for wm, info in new:
                current = ranges[-1]
                size = sum(f.size for _, f in current)
                if current and (size + info.size > max_bytes or (max_files and len(current) >= max_files)):
                    ranges.append([])
                ranges[-1].append((wm, info))
            previous = low
            for index, chunk in enumerate(ranges):
                high = chunk[-1][0]
                payload: dict[str, Any] = {"folder": folder, "files": [f.path for _, f in chunk]}
                units.append(
                    WorkUnit(
                        urn,
                        previous,
                        high,
                        range_index=index,
                        range_count=len(ranges),
                        estimated_bytes=sum(f.size for _, f in chunk),
                        payload=payload,
                    )
                )
                previous = high
        return units

    def _bounds(
        self, urn: str, low: str | None
    ) -> tuple[tuple[int, int, str] | None, tuple[int, int, str] | None]:
        """Sort keys of the low (exclusive) and, in a backfill, high (inclusive) bound."""
        high = self.backfill_high(urn)
        where = f"backfill ['{urn}']" if high is not None else f"previous watermark of '{urn}'"
        try:
            low_key = watermark_key(low) if low is not None else None
            high_key = watermark_key(high) if high is not None else None
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if low_key is not None and high_key is not None and low_key >= high_key:
            raise ValueError(f"{where}: low '{low}' is not below high '{high}'")
        return low_key, high_key

    def extract(self, work_unit: WorkUnit) -> Extraction:
        fmt = self._format()
        files = work_unit.payload["files"]
        refuse_foreign(files, fmt, work_unit.payload["folder"], self._reader_options())
        reader = self.spark.read.format(fmt).option("basePath", work_unit.payload["folder"])
        schema = self.props.get("source.schema")
        # A flow that chose Spark's own handling of bad rows (mode, or a corrupt-record column of
        # its own) keeps it; otherwise the rows are set aside (badrows).
        chosen = {k.lower() for k in self._reader_options()} & {"mode", "columnnameofcorruptrecord"}
        text = fmt in ("csv", "json") and not chosen
        if fmt == "csv":
            reader = reader.option(
                "header", str(self.props.get_bool("source.files.csv.header", True)).lower()
            )
            reader = reader.option("sep", self._delimiter())
            if not schema:
                infer = self.props.get_bool("source.files.csv.infer.schema", True)
                reader = reader.option("inferSchema", str(infer).lower())
        reader = reader.options(**self._reader_options())
        if text:  # a row Spark cannot read keeps its raw text in BAD (badrows), it is not passed on
            reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", badrows.BAD)
        if schema:
            reader = reader.schema(schema)
        if not text:
            df = reader.load(files)
            if fmt == "csv" and not schema:  # integers as bigint: the inferred schema, widened
                df = reader.schema(_widened(df.schema)).load(files)
            return Extraction(df)
        # The data columns (declared, or inferred once as before), read again with the bad-record
        # column: inference only adds it when it met a bad row.
        declared = reader.load(files).schema if not schema else _ddl(schema)
        fields = tuple(
            f
            for f in (_widened(declared) if fmt == "csv" and not schema else declared)
            if f.name != badrows.BAD
        )
        df = reader.schema(T.StructType([*fields, T.StructField(badrows.BAD, T.StringType())])).load(files)
        df = df.withColumn(badrows.SOURCE_FILE, F.col("_metadata.file_path"))
        bad = badrows.BadRecords(fmt, fields, self._delimiter())
        return Extraction(
            df,
            metrics={badrows.METRIC: bad.metric()},
            keep=bad.keep,
            helper_columns=[badrows.BAD, badrows.SOURCE_FILE],
            bad_records=bad,
        )

    def _delimiter(self) -> str:
        return self.props.get("source.files.csv.delimiter", ",") or ","

    def _reader_options(self) -> dict[str, str]:
        return node_relative.reader_options(self.props, self.props.require("source.files.path"))


# The first bytes of formats a file may be in (``(magic, name, suffixes that make it expected)``):
# a text reader would read any of them as lines of garbage.
_MAGIC = (
    (b"PAR1", "Parquet", ()),
    (b"ORC", "ORC", ()),
    (b"Obj\x01", "Avro", ()),
    (b"\x1f\x8b", "gzip", (".gz", ".gzip")),
    (b"BZh", "bzip2", (".bz2",)),
    (b"\x28\xb5\x2f\xfd", "zstd", (".zst", ".zstd")),
    (b"\x04\x22\x4d\x18", "LZ4", (".lz4",)),
    (b"PK\x03\x04", "ZIP (or Excel)", ()),
    (b"%PDF", "PDF", ()),
    (b"\x89PNG", "PNG", ()),
    (b"\xff\xd8\xff", "JPEG", ()),
    (b"SQLite format 3\x00", "SQLite", ()),
)
_CODEC_SUFFIXES = (".gz", ".gzip", ".bz2", ".deflate", ".snappy", ".lz4", ".zst", ".zstd")
_NAMES = {"csv": "CSV", "json": "JSON", "parquet": "Parquet", "orc": "ORC", FORMATS["avro"]: "Avro"}
_HEAD = 4096


def sniff(head: bytes, name: str) -> str | None:
    """The format the first bytes of a file named ``name`` say it is in (None: text, or unknown)."""
    lowered = name.lower()
    for magic, kind, suffixes in _MAGIC:
        if head.startswith(magic) and not (suffixes and lowered.endswith(suffixes)):
            return kind
    return None


def foreign(head: bytes, name: str, fmt: str, encoding: str = "") -> str | None:
    """What a file is when it is not in the dataset's format ``fmt`` (None: it may be)."""
    if not head:
        return None  # an empty file is no row in any format
    kind = sniff(head, name)
    wanted = _NAMES.get(fmt, fmt)
    if fmt in ("csv", "json"):
        if kind:
            return f"a {kind} file"
        compressed = name.lower().endswith(_CODEC_SUFFIXES)  # Hadoop decompresses it by its name
        wide = encoding.lower().startswith(("utf-16", "utf-32", "utf16", "utf32"))
        if b"\x00" in head and not compressed and not wide:
            return "a binary file (it holds NUL bytes)"
        return None
    if kind == wanted:
        return None
    return f"a {kind} file" if kind else f"not a {wanted} file (no {wanted} magic bytes at its start)"


def refuse_foreign(files: list[str], fmt: str, folder: str, options: dict[str, str]) -> None:
    """Refuse, by name, the files of a work unit that are not in the dataset's format: a Parquet
    file dropped into a CSV folder fails the task before Spark reads it as text."""
    encoding = next((v for k, v in options.items() if k.lower() in ("encoding", "charset")), "")
    refused = []
    for path in files:
        what = foreign(fs.head(path, _HEAD), path, fmt, encoding)
        if what:
            relative = path[len(folder) :].lstrip("/") if path.startswith(folder) else path
            refused.append(f"'{relative}' is {what}")
    if refused:
        raise PipelineError(
            f"file(s) not in the dataset's format ({_NAMES.get(fmt, fmt)}, source.files.format), "
            f"refused, nothing of them read: {'; '.join(refused[:10])}"
            + (f" and {len(refused) - 10} more" if len(refused) > 10 else "")
            + " (move them out of the folder, or narrow source.files.glob)"
        )


def _ddl(schema: str) -> T.StructType:
    parsed = T._parse_datatype_string(schema)
    if not isinstance(parsed, T.StructType):
        raise ConfigError(f"source.schema must be a list of columns (name type, ...), got '{schema}'")
    return parsed


def _widened(schema: T.StructType) -> T.StructType:
    """Inferred CSV integers as bigint, as JSON inference and JDBC ``bigint`` columns give them: the
    same table read from a CSV drop and from the database lands with one schema."""
    narrow = (T.ByteType, T.ShortType, T.IntegerType)
    return T.StructType(
        [
            T.StructField(f.name, T.LongType(), f.nullable, f.metadata)
            if isinstance(f.dataType, narrow)
            else f
            for f in schema.fields
        ]
    )
