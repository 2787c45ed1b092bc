"""The files destination: Parquet, ORC, JSON lines, CSV (with header) or Avro, through Spark's writers.

``writer.output.format(.N)`` picks the format (``PARQUET`` by default); JDBC and Iceberg are the
other kinds (:mod:`portal.pipeline.destinations.builder`).

AVRO needs no download: PySpark 4 ships Spark's Avro file format inside ``spark-sql``
(``org.apache.spark.sql.avro.AvroFileFormat``); only the ``avro`` short name is registered by the
separate ``spark-avro`` module, which PySpark does not ship (and Debian/PyPI do not package), so the
writer names the class.  If a Spark build lacks the class, the branch fails before reading anything
with a ConfigError naming ``writer.output.format`` and the reason.

File writers write with Spark to ``<writer.staging.dir>/<job>/<execution>/<task>/branch_<N>``
(default ``<work_dir>/task-staging``), then rename every data file to the same relative path under
``<writer.output.dir>/...`` (default ``<work_dir>/task-output``); a failed write leaves no task output.
Options: ``writer.partition.columns`` (Hive-style folders; the name ``ingestion_date`` adds the task's
ingestion date when the records have no such field), ``writer.file.max.records`` and
``writer.target.file.size`` (bytes; approximate — output files = estimated input bytes / target,
by coalescing, never by a shuffle), ``writer.codec``.  ``data.publisher.final.dir(.N)`` is required:
it is where the publisher will move the files (checked before any data is read).

Publishing an appending dataset moves each task-output file into it with one ``fs_rename`` step
(:class:`FsRenameCommitStep`): local paths via ``os``, Hadoop URIs (and ``file://``) via the active
Spark JVM's FileSystem.  verify: destination present with the same content (same bytes as a
still-present source, or the recorded size) -> True; destination present with different content ->
:class:`~portal.pipeline.errors.CommitConflictError` (never overwritten); neither present ->
CommitConflictError (the task output was lost).  The replacing write modes publish through
:mod:`portal.pipeline.destinations.files_replace` instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from portal.pipeline import fs
from portal.pipeline.destinations import write_modes
from portal.pipeline.destinations.base import (
    CommitStep,
    DataWriter,
    WriterContext,
    WriteResult,
    register_step_type,
)
from portal.pipeline.errors import CommitConflictError, ConfigError
from portal.pipeline.properties import Properties
from portal.pipeline.spark import gateway

AVRO_FILE_FORMAT = "org.apache.spark.sql.avro.AvroFileFormat"
FILE_FORMATS = {"PARQUET": "parquet", "ORC": "orc", "JSON": "json", "CSV": "csv", "AVRO": AVRO_FILE_FORMAT}


def avro_available(spark: SparkSession) -> bool:
    """Whether this Spark build has its Avro file format on the classpath (PySpark >= 4.0 does)."""
    try:
        return bool(gateway.jvm(spark).org.apache.spark.util.Utils.classIsLoadable(AVRO_FILE_FORMAT))
    except Exception:
        return False


class FileDataWriter(DataWriter):
    """PARQUET / ORC / JSON / CSV through Spark's file writers."""

    def __init__(self, props: Properties, ctx: WriterContext, fmt: str) -> None:
        super().__init__(props, ctx)
        self.format = fmt
        self._final_dir = props.require("data.publisher.final.dir")
        self.staging_dir = self._task_path("writer.staging.dir", "task-staging")
        self.output_dir = self._task_path("writer.output.dir", "task-output")
        self.partition_columns = props.get_list("writer.partition.columns")
        self.write_mode = write_modes.resolve(props, fmt)  # refused here, before any read

    @property
    def final_dir(self) -> str | None:
        return self._final_dir

    def write(self, df: DataFrame) -> WriteResult:
        if "ingestion_date" in self.partition_columns and "ingestion_date" not in df.columns:
            df = df.withColumn("ingestion_date", F.lit(self.ctx.ingestion_time.date().isoformat()))
        missing = [c for c in self.partition_columns if c not in df.columns]
        if missing:
            raise ConfigError(
                f"{self.props.describe('writer.partition.columns')}: field(s) {', '.join(missing)} do not exist"
            )
        target = self.props.get_int("writer.target.file.size")
        if target and self.ctx.estimated_input_bytes:
            df = df.coalesce(max(1, math.ceil(self.ctx.estimated_input_bytes / target)))
        writer = df.write.format(self.spark_format).mode("overwrite").options(**self.spark_options())
        max_records = self.props.get_int("writer.file.max.records")
        if max_records:
            writer = writer.option("maxRecordsPerFile", str(max_records))
        if self.partition_columns:
            writer = writer.partitionBy(*self.partition_columns)
        writer.save(self.staging_dir)
        return self.collect(self.staging_dir)

    @property
    def spark_format(self) -> str:
        return FILE_FORMATS[self.format]

    def spark_options(self) -> dict[str, str]:
        """The options of this branch's Spark file format (not of the write as a whole)."""
        options = {"header": "true"} if self.format == "CSV" else {}
        codec = self.props.get("writer.codec")
        if codec:
            options["compression"] = codec
        return options

    @property
    def plain(self) -> bool:
        """Whether the write is the format alone: no partition folders, file sizing or record limit,
        which are settings of a whole Spark write (so a one-pass fork cannot give them per branch)."""
        return not (
            self.partition_columns
            or self.props.get_int("writer.target.file.size")
            or self.props.get_int("writer.file.max.records")
        )

    def collect(self, staged: str) -> WriteResult:
        """Move the data files Spark wrote under ``staged`` to this branch's task output."""
        fs.delete(self.output_dir)
        files: list[dict[str, Any]] = []
        forked = (self.props.get_int("fork.branches", 1) or 1) > 1
        for info in fs.list_files(staged):
            relative = branch_file_name(info.relative, self.ctx.branch_index) if forked else info.relative
            dst = fs.join(self.output_dir, relative)
            fs.rename(info.path, dst)
            files.append({"path": dst, "size": info.size})
        fs.delete(staged)
        return WriteResult(self.output_dir, files, sum(f["size"] for f in files))

    def abort(self) -> None:
        fs.delete(self.staging_dir)
        fs.delete(self.output_dir)


def branch_file_name(relative: str, branch: int) -> str:
    """``part-0-c000.snappy.parquet`` -> ``part-0-c000-b1.snappy.parquet``: the name the one-pass fork
    gives, so every branch's files are told apart when branches publish to the same folder (and a
    next hop can read one branch with ``source.files.glob``)."""
    folder, _, name = relative.rpartition("/")
    if re.search(r"-b\d+\.", name):
        return relative
    stem, dot, extension = name.partition(".")
    renamed = f"{stem}-b{branch}{dot}{extension}"
    return f"{folder}/{renamed}" if folder else renamed


@register_step_type
class FsRenameCommitStep(CommitStep):
    type = "fs_rename"

    def __init__(
        self, src: str, dst: str, size: int | None = None, extra: dict[str, Any] | None = None
    ) -> None:
        self.src, self.dst, self.size = src, dst, size
        self.extra = extra or {}

    @classmethod
    def build(cls, data: Mapping[str, Any], properties: Mapping[str, str] | None) -> CommitStep:
        extra = {k: v for k, v in data.items() if k not in ("type", "src", "dst", "size")}
        return cls(data["src"], data["dst"], data.get("size"), extra)

    def to_dict(self) -> dict[str, Any]:
        return {**self.extra, "type": self.type, "src": self.src, "dst": self.dst, "size": self.size}

    def verify(self) -> bool:
        if fs.exists(self.dst):
            if fs.exists(self.src):
                if fs.digest(self.src) == fs.digest(self.dst):
                    return True
                raise CommitConflictError(
                    f"cannot publish {self.src}: {self.dst} exists with different content"
                )
            if self.size is not None and fs.size(self.dst) != int(self.size):
                raise CommitConflictError(
                    f"{self.dst} exists with {fs.size(self.dst)} bytes, expected {self.size} from {self.src}"
                )
            return True
        if not fs.exists(self.src):
            raise CommitConflictError(
                f"cannot publish {self.src}: it does not exist and {self.dst} was not written"
            )
        return False

    def execute(self) -> None:
        if self.verify():
            return
        fs.rename(self.src, self.dst)
