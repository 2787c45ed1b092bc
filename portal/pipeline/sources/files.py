"""Files source: CSV, JSON lines, Parquet, ORC or Avro on a local path or any Hadoop URI.

Datasets: each top-level folder under ``source.files.path`` is a dataset whose ``dataset.urn`` is the
folder name (``source.files.dataset.level=1``, the default; restrict with ``source.files.datasets``),
or the root itself is one dataset (``source.files.dataset.level=0``, urn = ``dataset.urn`` or the
root's base name).

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
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from portal.pipeline import fs
from portal.pipeline.errors import ConfigError
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
        return [(name, fs.join(root, name)) for name in names]

    def get_work_units(self) -> list[WorkUnit]:
        root = self.props.require("source.files.path")
        self._format()  # fail early on an unknown format
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
        reader = self.spark.read.format(fmt).option("basePath", work_unit.payload["folder"])
        schema = self.props.get("source.schema")
        if fmt == "csv":
            reader = reader.option(
                "header", str(self.props.get_bool("source.files.csv.header", True)).lower()
            )
            reader = reader.option("sep", self.props.get("source.files.csv.delimiter", ","))
            if not schema:
                infer = self.props.get_bool("source.files.csv.infer.schema", True)
                reader = reader.option("inferSchema", str(infer).lower())
        for key in self.props:
            if key.startswith("source.files.option."):
                reader = reader.option(key[len("source.files.option.") :], self.props[key])
        if schema:
            reader = reader.schema(schema)
        df = reader.load(work_unit.payload["files"])
        if fmt == "csv" and not schema:
            df = _wide_integers(df)
        return Extraction(df)


def _wide_integers(df: DataFrame) -> DataFrame:
    """Inferred CSV integers as bigint, as JSON inference and JDBC ``bigint`` columns give them: the
    same table read from a CSV drop and from the database lands with one schema."""
    narrow = (T.ByteType, T.ShortType, T.IntegerType)
    if not any(isinstance(f.dataType, narrow) for f in df.schema.fields):
        return df
    return df.select(
        *[
            F.col(f"`{f.name}`").cast("bigint").alias(f.name)
            if isinstance(f.dataType, narrow)
            else F.col(f"`{f.name}`")
            for f in df.schema.fields
        ]
    )
