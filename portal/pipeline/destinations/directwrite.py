"""Parquet written by the Python workers straight from an Arrow extract, skipping Spark's rows.

An extract the source can read as Arrow (:class:`portal.pipeline.sources.base.ArrowScan`, e.g. the
PostgreSQL COPY reader) handed to Spark's Parquet writer crosses into the JVM batch by batch, is
turned into rows there and encoded row by row again.  On a 2-core machine that hand-over, not the
database, was the cost (tests/bench/bench_extract.py).  Here each Spark task reads its slice of the
scan and encodes it with Arrow's own Parquet writer, in the same worker: one pass, columnar end to
end.  Spark still runs the tasks (its job group cancels them, its scheduler retries them) and the
task's staging folder receives the same kind of files Spark would write there — standard Parquet
with Spark's schema in its footer, every column nullable, timestamps as INT64 microseconds
adjusted to UTC, decimals as integers where they fit — which the writer then moves to task output
as usual (:meth:`portal.pipeline.destinations.files.FileDataWriter.collect`).

Exactly once: a task attempt writes under ``_attempts`` with a name of its own and returns it; only
the files of the attempts Spark's job returned are moved into staging, and ``_attempts`` is removed,
so a failed or retried attempt leaves nothing that could be published.

Taken (:func:`eligible`) only where it gives the same output as Spark's write: one branch taking
every record unchanged (no converters, row checkers, look-back filter or observed metrics), written
by the plain Parquet file writer (no partition folders, file sizing or record limit) with a codec
both writers share, to a staging folder the Python workers reach (:func:`reachable`): on a local
master the driver's disk; on a cluster a path every Spark worker sees the same (a shared mount, as
Spark's own writer needs there, or the loopback cluster's one disk) or a URI of a store pyarrow's file
systems open (``hdfs://``, ``s3://``/``s3a://``, ``gs://``, ``abfs://``, ``file://``).  Anything
else goes through Spark's writer.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from portal.pipeline import fs
from portal.pipeline.destinations.base import WriteResult
from portal.pipeline.destinations.files import FileDataWriter
from portal.pipeline.sources.base import ArrowScan, SliceReader

ATTEMPTS = "_attempts"  # hidden from fs.list_files, as Spark's _temporary
SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"  # where Spark keeps its schema
# writer.codec (Spark's names) -> Arrow's codec and Spark's file-name extension.
CODECS = {"snappy": ("snappy", ".snappy"), "gzip": ("gzip", ".gz"), "zstd": ("zstd", ".zstd")}
CODECS.update({"none": ("none", ""), "uncompressed": ("none", "")})
# URI schemes pyarrow.fs opens, and how pyarrow spells the ones Hadoop names otherwise.
ARROW_SCHEMES = {"file": "file", "hdfs": "hdfs", "viewfs": "hdfs", "s3": "s3", "s3a": "s3", "s3n": "s3"}
ARROW_SCHEMES.update({"gs": "gs", "gcs": "gs", "abfs": "abfs", "abfss": "abfss"})


def eligible(spark: SparkSession, scan: ArrowScan | None, schema: T.StructType, writer: Any) -> bool:
    """Whether ``writer`` may take ``scan`` directly for an extract of ``schema``; the caller has
    checked that the task has one branch taking every record of a plain feed unchanged."""
    return (
        scan is not None
        and scan.schema == schema  # the scan still is the extract (no schema rule changed it)
        and type(writer) is FileDataWriter
        and writer.format == "PARQUET"
        and writer.plain
        and _codec(writer) in CODECS
        and reachable(spark.sparkContext.master or "", writer.staging_dir)
    )


def reachable(master: str, staging: str) -> bool:
    """Whether the Python workers of ``master`` can write into ``staging`` for the driver to
    move: a local master's workers share its disk; a cluster's write a plain path on their own
    hosts (the same path Spark's writer would write, shared as it must be for that writer too)
    or a URI through pyarrow's file systems."""
    if master.startswith("local"):
        return fs.is_local(staging)
    return not _scheme(staging) or _scheme(staging) in ARROW_SCHEMES


def _scheme(uri: str) -> str:
    found = uri.split("://", 1)[0].lower() if "://" in uri else ""
    return found if len(found) > 1 else ""


def arrow_location(uri: str) -> tuple[Any, str]:
    """(pyarrow file system, path in it) of a staging folder: the local disk for a plain path,
    else the store the URI names (``s3a://bucket/x`` is pyarrow's ``s3://bucket/x``)."""
    from pyarrow import fs as pafs

    scheme = _scheme(uri)
    if not scheme:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    filesystem, path = pafs.FileSystem.from_uri(ARROW_SCHEMES[scheme] + uri[len(scheme) :])
    return filesystem, str(path)


def _codec(writer: FileDataWriter) -> str:
    return (writer.props.get("writer.codec") or "snappy").lower()


def write(spark: SparkSession, scan: ArrowScan, writer: FileDataWriter) -> tuple[WriteResult, int]:
    """Write ``scan`` as ``writer``'s Parquet task output; returns it and the records written."""
    codec, extension = CODECS[_codec(writer)]
    fs.delete(writer.staging_dir)
    attempts = fs.join(writer.staging_dir, ATTEMPTS)
    task = _SliceWriter(scan.reader, scan.schema.json(), attempts, codec)
    written = (
        spark.range(0, scan.slices, 1, scan.slices)
        .mapInArrow(task, "slice long, path string, records long")
        .collect()
    )
    run = uuid.uuid4()
    # Slices that found no row leave no file, unless none found any: then one file holds the
    # schema, as Spark's writer does.
    for row in [r for r in written if r["records"]] or written[:1]:
        name = f"part-{row['slice']:05d}-{run}-c000{extension}.parquet"
        fs.rename(row["path"], fs.join(writer.staging_dir, name))
    fs.delete(attempts)
    return writer.collect(writer.staging_dir), sum(row["records"] for row in written)


class _SliceWriter:
    """Runs in the Python workers: each slice number that arrives becomes one Parquet file in
    ``folder`` (a path or a URI, returned in the same form for the driver to move)."""

    def __init__(self, reader: SliceReader, schema_json: str, folder: str, codec: str) -> None:
        self.reader, self.schema_json, self.folder, self.codec = reader, schema_json, folder, codec

    def __call__(self, numbers: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in numbers:
            for number in batch.column(0).to_pylist():
                path, records = self._write(number)
                yield pa.RecordBatch.from_pydict(
                    {"slice": [number], "path": [path], "records": [records]},
                    schema=pa.schema([("slice", pa.int64()), ("path", pa.string()), ("records", pa.int64())]),
                )

    def _write(self, number: int) -> tuple[str, int]:
        import pyarrow.parquet as pq

        schema = file_schema(T.StructType.fromJson(json.loads(self.schema_json)))
        filesystem, folder = arrow_location(self.folder)
        filesystem.create_dir(folder, recursive=True)
        name = f"{number:05d}-{uuid.uuid4()}.parquet"
        records = 0
        with pq.ParquetWriter(
            f"{folder.rstrip('/')}/{name}",
            schema,
            filesystem=filesystem,
            compression=self.codec,
            store_decimal_as_integer=True,  # INT32/INT64 decimals where they fit, as Spark writes them
            write_time_adjusted_to_utc=True,
        ) as out:
            for batch in self.reader.batches([number]):
                out.write_batch(batch.cast(schema) if batch.schema != schema else batch)
                records += batch.num_rows
        return fs.join(self.folder, name), records


def file_schema(schema: T.StructType) -> Any:
    """The Arrow schema of the files: ``schema``'s columns, every one nullable (Spark's writer makes
    them so), with Spark's own schema in the footer so Spark reads the exact types back."""
    from pyspark.sql.pandas.types import to_arrow_schema

    nullable = T.StructType([T.StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])
    arrow = to_arrow_schema(nullable, timezone="UTC")  # instants as UTC, as the reader gives them
    return arrow.with_metadata({SPARK_SCHEMA_KEY: nullable.json().encode()})
