"""Test connection and discovery of a files node: the root exists and is readable by the portal;
discovery lists the data files under it (at most `DISCOVERY_MAX_FILES`, never following a link
out of the root) with the columns of CSV headers, JSON lines (typed as Spark will read them,
`sniffing`) and Parquet footers. Each file offers its modification time as the watermark, as the
files source uses it. Paths on HDFS or object stores are left to the workers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from portal.pipeline.confinement import contains, relative_name_problem
from portal.pipeline.discovery import shapes
from portal.pipeline.discovery.shapes import (
    Asking,
    Column,
    ConnectionResult,
    Dataset,
    Discovery,
    Probe,
)
from portal.pipeline.discovery.sniffing import csv_columns, json_columns
from portal.pipeline.nodekinds.kind import rooted

DATA_SUFFIXES = {".csv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}


def _root(asking: Asking) -> str | None:
    path = asking.properties.get("path", "")
    return rooted(path, asking.data_dir) if path else None


def test(asking: Asking) -> ConnectionResult:
    root = _root(asking)
    if root is None:
        return ConnectionResult(False, "The node has no path.")
    if "://" in root:
        return ConnectionResult(
            False, f"{root}: the portal checks local paths only; the workers read this one."
        )
    try:
        entries = len(os.listdir(root))
    except OSError as error:
        return ConnectionResult(False, f"{root}: {error.strerror or error}")
    if not os.access(root, os.R_OK | os.X_OK):
        return ConnectionResult(False, f"{root}: not readable by the portal")
    return ConnectionResult(True, f"{root} exists and is readable ({entries} entries).")


def discover(asking: Asking, folder: str = "") -> Discovery:
    """The data files under the root, or under `folder` below it (an upstream flow's output,
    ``<flowGroup>/<flowName>``), named relative to where the walk started; never outside the root."""
    checked = test(asking)
    if not checked.ok:
        return Discovery(False, checked.message)
    root = os.path.realpath(_root(asking) or "")
    if folder:
        below = os.path.realpath(os.path.join(root, folder))
        if relative_name_problem(folder, folders=True) or not contains(root, below):
            return Discovery(False, f"'{folder[:120]}' is not a folder inside the node.")
        root = below
    datasets: list[Dataset] = []
    truncated = False
    visited = 0
    for where, dirs, files in os.walk(root):  # os.walk does not follow links into folders
        dirs.sort()
        visited += len(files) + len(dirs)
        if visited > shapes.DISCOVERY_MAX_ENTRIES:  # a huge tree: answer in seconds with what was seen
            truncated = True
            break
        for name in sorted(files):
            path = os.path.join(where, name)
            kind = DATA_SUFFIXES.get(Path(name).suffix.lower())
            if kind is None or not contains(root, os.path.realpath(path)):
                continue  # not data, or a link out of the root
            if len(datasets) >= shapes.DISCOVERY_MAX_FILES:
                truncated = True
                break
            datasets.append(file_dataset(path, os.path.relpath(path, root), kind))
        if truncated:
            break
    return Discovery(True, f"{len(datasets)} data file(s) under {root}.", datasets, truncated)


def _arrow_type(kind: Any) -> str:
    """A Parquet column's Arrow type as shown: a decimal with its precision and scale as Spark
    names it (`decimal(12,2)`, not `decimal128(12, 2)`), the others as Arrow names them."""
    precision, scale = getattr(kind, "precision", None), getattr(kind, "scale", None)
    if precision is not None and scale is not None and str(kind).startswith("decimal"):
        return f"decimal({precision},{scale})"
    return str(kind)


def file_dataset(path: str, name: str, kind: str) -> Dataset:
    """One data file's columns (`kind`: csv, json or parquet), its modification time the watermark."""
    try:
        modified = os.stat(path).st_mtime
    except OSError:
        modified = None
    try:
        if kind == "csv":
            columns, rows = csv_columns(path)
            for column in columns:
                column.in_file = True
            return Dataset(name, columns, f"CSV, types from the first {rows} row(s)", modified)
        if kind == "json":
            fields, rows, corrupt = json_columns(path)
            if not fields or (corrupt and len(fields) == 1):
                return Dataset(name, [], "not JSON lines of objects", modified)
            for column in fields:
                column.in_file = True
            return Dataset(name, fields, f"JSON lines, types from the first {rows} line(s)", modified)
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
        columns = [Column(item.name, _arrow_type(item.type), in_file=True) for item in schema]
        return Dataset(name, columns, "Parquet footer", modified)
    except Exception as error:
        return Dataset(name, [], f"unreadable: {type(error).__name__}: {error}"[:300], modified)


PROBE = Probe(test=test, discover=discover)
