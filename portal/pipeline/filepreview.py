"""The first rows of a files dataset (Parquet, CSV, JSON lines), read with pyarrow for the
portal's preview of what an execution delivered.

Each file is opened by its real path only when that lies inside the data node's root
(:func:`portal.pipeline.confinement.real_inside`, symlinks followed), whatever spelling reached it;
at most `limit` rows are read (a Parquet file's first row group batch, a CSV's first block, a JSON
file's first lines), so a preview of a large dataset costs a little, not the dataset. Compressed
CSV and JSON (``.gz``, ``.bz2``, ``.zst``, …) are decompressed as read. No Django here.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from portal.pipeline.confinement import real_inside

FORMATS = ("PARQUET", "CSV", "JSON")
_SUFFIXES = {".parquet": "PARQUET", ".csv": "CSV", ".json": "JSON", ".jsonl": "JSON"}
_COMPRESSIONS = {".gz", ".gzip", ".bz2", ".zst", ".lz4", ".snappy"}
MAX_READ_BYTES = 4 << 20  # of a JSON file: the preview's rows are in its first 4 MiB


class PreviewError(Exception):
    """The files cannot be previewed; the message says why without naming a server path."""


@dataclass
class Rows:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    files_read: int = 0
    missing: list[str] = field(default_factory=list)


def format_of(name: str, given: str = "") -> str:
    """A file's format by its name (``part-0.snappy.parquet``, ``part-0.csv.gz``), else `given`."""
    stem, suffix = os.path.splitext(name.lower())
    if suffix in _COMPRESSIONS:
        suffix = os.path.splitext(stem)[1]
    return _SUFFIXES.get(suffix, given.upper())


def _parquet(path: str, limit: int) -> tuple[list[str], list[tuple[Any, ...]]]:
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as parquet:
        columns = list(parquet.schema_arrow.names)
        for batch in parquet.iter_batches(batch_size=limit):
            return columns, [tuple(row.values()) for row in batch.to_pylist()[:limit]]
    return columns, []


def _csv(path: str, limit: int) -> tuple[list[str], list[tuple[Any, ...]]]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    with pa.input_stream(path, compression="detect") as stream:
        reader = pacsv.open_csv(stream, read_options=pacsv.ReadOptions(block_size=1 << 20))
        columns = list(reader.schema.names)
        rows: list[tuple[Any, ...]] = []
        for batch in reader:
            rows.extend(tuple(row.values()) for row in batch.to_pylist())
            if len(rows) >= limit:
                break
    return columns, rows[:limit]


def _json(path: str, limit: int) -> tuple[list[str], list[tuple[Any, ...]]]:
    import pyarrow as pa

    records: list[dict[str, Any]] = []
    with pa.input_stream(path, compression="detect") as stream:
        head = stream.read(MAX_READ_BYTES)
    lines = head.split(b"\n")
    if len(head) == MAX_READ_BYTES:
        lines = lines[:-1]  # cut inside a line
    for line in lines:
        if len(records) >= limit:
            break
        if line.strip():
            value = json.loads(line)
            records.append(value if isinstance(value, dict) else {"value": value})
    columns = list(dict.fromkeys(key for record in records for key in record))
    return columns, [tuple(record.get(column) for column in columns) for record in records]


_READERS = {"PARQUET": _parquet, "CSV": _csv, "JSON": _json}


def first_rows(folder: str, names: list[str], root: str, fmt: str, limit: int) -> Rows:
    """The first `limit` rows of the files `names` (relative to `folder`) that are still there,
    in their order; every file opened only inside `root`. PreviewError when none is readable."""
    folder = real_inside(folder, root, "the dataset's folder")
    found = Rows([], [])
    for name in names:
        if len(found.rows) >= limit:
            break
        kind = format_of(name, fmt)
        reader = _READERS.get(kind)
        if reader is None:
            raise PreviewError(f"The portal previews Parquet, CSV and JSON files, not {kind or 'these'}.")
        path = real_inside(os.path.join(folder, name), root, "a file of the dataset")
        if not os.path.isfile(path):
            found.missing.append(name)
            continue
        try:
            columns, rows = reader(path, limit - len(found.rows))
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
            raise PreviewError(f"{name} could not be read as {kind}: {type(error).__name__}") from error
        found.files_read += 1
        if not found.columns:
            found.columns = columns
        for row in rows:  # a later file's columns in the first file's order
            values = dict(zip(columns, row, strict=False))
            found.rows.append(tuple(values.get(column) for column in found.columns))
    if not found.files_read:
        raise PreviewError("The files this execution delivered are no longer there.")
    return found
