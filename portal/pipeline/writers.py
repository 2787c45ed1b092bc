"""Writers: each branch writes its records to a staging location, then moves them to task output.

``writer.output.format(.N)`` picks the writer: ``PARQUET`` (default), ``ORC``, ``JSON`` (JSON lines),
``CSV`` (with header), ``AVRO``, ``JDBC`` or ``ICEBERG`` (:mod:`portal.pipeline.iceberg`); ``writer.builder.class(.N)`` names a custom
:class:`DataWriter` subclass instead.

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

The JDBC writer (``writer.jdbc.url``, ``writer.jdbc.table``, ``writer.jdbc.username``,
``writer.jdbc.password``, ``writer.jdbc.marker.table``) writes the branch into its own staging table
next to the target; publishing appends it to the target in one transaction
(:class:`portal.pipeline.commit_steps.JdbcPublishCommitStep`). ``{table}`` in ``writer.jdbc.table``
gives each dataset its own target (:mod:`portal.pipeline.table_templates`). Before anything is read,
the writer opens one connection as Spark's writer will and asks where it landed
(:mod:`portal.pipeline.landing`): the portal's own database is refused, and on MySQL/MariaDB a target
or marker table naming another database than the one it landed in.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from psycopg import sql
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from portal.pipeline import fs, gateway, landing, pgconn, table_templates, write_modes
from portal.pipeline.dialects import dialect_for
from portal.pipeline.errors import ConfigError
from portal.pipeline.jdbc_targets import JdbcTarget
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.loader import load_class
from portal.pipeline.properties import Properties

AVRO_FILE_FORMAT = "org.apache.spark.sql.avro.AvroFileFormat"
FILE_FORMATS = {"PARQUET": "parquet", "ORC": "orc", "JSON": "json", "CSV": "csv", "AVRO": AVRO_FILE_FORMAT}
ALL_FORMATS = (*FILE_FORMATS, "JDBC", "ICEBERG")


def avro_available(spark: SparkSession) -> bool:
    """Whether this Spark build has its Avro file format on the classpath (PySpark >= 4.0 does)."""
    try:
        return bool(gateway.jvm(spark).org.apache.spark.util.Utils.classIsLoadable(AVRO_FILE_FORMAT))
    except Exception:
        return False


@dataclass
class WriterContext:
    """Where a branch of a task writes, and facts for sizing/partitioning."""

    spark: SparkSession
    jobspec: JobSpec
    task_id: str
    dataset_urn: str
    branch_index: int
    branch_name: str
    work_dir: str
    ingestion_time: dt.datetime
    estimated_input_bytes: int = 0


@dataclass
class WriteResult:
    output_dir: str | None = None
    output_files: list[dict[str, Any]] = field(default_factory=list)
    bytes_written: int = 0
    staging_table: str | None = None


class DataWriter(ABC):
    """Base class: validate configuration in ``__init__`` (before any read), write in :meth:`write`."""

    format = "CUSTOM"

    def __init__(self, props: Properties, ctx: WriterContext) -> None:
        self.props = props
        self.ctx = ctx

    @property
    def final_dir(self) -> str | None:
        return None

    @abstractmethod
    def write(self, df: DataFrame) -> WriteResult:
        """Write the branch's records to staging."""

    def abort(self) -> None:  # noqa: B027  (optional hook: most writers leave nothing behind)
        """Remove whatever a failed or unpublishable write left behind."""

    def _task_path(self, key: str, default_leaf: str) -> str:
        root = self.props.get(key) or fs.join(self.ctx.work_dir, default_leaf)
        spec = self.ctx.jobspec
        return fs.join(
            root, spec.job_name, str(spec.execution_id), self.ctx.task_id, f"branch_{self.ctx.branch_index}"
        )


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


def staging_table_name(target: str, jobspec: JobSpec, task_id: str, branch: int) -> str:
    """A short, unique staging table beside the target (PostgreSQL names are at most 63 bytes)."""
    schema, _, _table = target.rpartition(".")
    digest = hashlib.sha1(  # noqa: S324 - a name, not a security boundary
        f"{jobspec.job_name}/{jobspec.execution_id}/{task_id}/{branch}/{target}".encode()
    ).hexdigest()[:20]
    name = f"fp_stg_{digest}"
    return f"{schema}.{name}" if schema else name


class JdbcDataWriter(DataWriter):
    """Append to a database table through a per-branch staging table."""

    format = "JDBC"

    def __init__(self, props: Properties, ctx: WriterContext) -> None:
        super().__init__(props, ctx)
        self.url = props.require("writer.jdbc.url")
        # ``{table}``: this dataset's own target (portal.pipeline.table_templates)
        key = "writer.jdbc.table"
        self.table = table_templates.resolve(props.require(key), ctx.dataset_urn, props.describe(key))
        self.staging_table = staging_table_name(self.table, ctx.jobspec, ctx.task_id, ctx.branch_index)
        self.error_staging_table: str | None = None  # bad records staged (badtables)
        self.write_mode = write_modes.resolve(props, "JDBC")  # refused here, before any read
        self.what = landing.node_what(ctx.jobspec.extra, "destination", "writer.jdbc.url")
        self._check_landing()

    def _check_landing(self) -> None:
        """Before any read: where the writer's connections land, refused if the portal's own database
        or (MySQL/MariaDB) if a table it would write is outside the database it landed in."""
        portal = landing.portal_databases(self.ctx.jobspec.extra)
        found = landing.check_jdbc(self.ctx.spark, self._options(), self.what, portal=portal)
        marker = self.props.get("writer.jdbc.marker.table") or "flowport_publish_marker"
        names = {
            self.props.describe("writer.jdbc.table"): [self.table],
            self.props.describe("writer.jdbc.marker.table"): [marker],
        }
        landing.own_database(found, names, self.what)

    def _options(self) -> dict[str, str]:
        dialect = dialect_for(self.url, "writer.jdbc.url")
        options = {
            "url": dialect.spark_url(self.url),
            "driver": self.props.get("writer.jdbc.driver") or dialect.driver,
        }
        user = self.props.get("writer.jdbc.username")
        password = self.props.get("writer.jdbc.password")
        if user:
            options["user"] = user
        if password:
            options["password"] = password
        options["batchsize"] = self.props.get("writer.jdbc.batchsize", "5000") or "5000"
        return options

    def write(self, df: DataFrame) -> WriteResult:
        self._stage(df, self.staging_table)
        return WriteResult(staging_table=self.staging_table)

    def stage_errors(self, df: DataFrame) -> str:
        """Stage the task's bad records beside the branch's rows (:mod:`portal.pipeline.badtables`);
        the staging table's name."""
        table = self.staging_table + "_err"
        self._stage(df, table)
        self.error_staging_table = table
        return table

    def _stage(self, df: DataFrame, table: str) -> None:
        mode = "overwrite"
        dialect = dialect_for(self.url, "writer.jdbc.url")
        if dialect.own_ddl:  # SQLite: the table is made here, in the dialect's types
            target = JdbcTarget(
                self.url,
                self.props.get("writer.jdbc.username"),
                self.props.get("writer.jdbc.password"),
                what=self.what,
            )
            target.create(
                table,
                [(f.name, dialect.column_type(f.dataType) or "TEXT") for f in df.schema.fields],
            )
            mode = "append"
        df.write.format("jdbc").options(**self._options()).option("dbtable", table).mode(mode).save()

    def abort(self) -> None:
        for table in (self.staging_table, self.error_staging_table):
            if table:
                self._drop(table)

    def _drop(self, table: str) -> None:
        if not self.url.startswith("jdbc:postgresql:"):
            try:
                target = JdbcTarget(
                    self.url,
                    self.props.get("writer.jdbc.username"),
                    self.props.get("writer.jdbc.password"),
                    what=self.what,
                )
                with target.connect() as conn:
                    target.drop(conn, table)
            except Exception:  # noqa: S110 - best effort; a leftover staging table is harmless
                pass
            return
        try:
            conn = pgconn.connect(
                self.url,
                self.props.get("writer.jdbc.username"),
                self.props.get("writer.jdbc.password"),
                what=self.what,
            )
            with conn:
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(pgconn.table_ident(table)))
        except Exception:  # noqa: S110 - best effort; a leftover staging table is harmless
            pass


def build_writer(props: Properties, ctx: WriterContext) -> DataWriter:
    custom = props.get("writer.builder.class")
    if custom:
        cls: type[DataWriter] = load_class(custom, props.describe("writer.builder.class"), DataWriter)
        return cls(props, ctx)
    # The allowed formats, the default and the refusal's message are the property schema's.
    fmt = props.get_choice("writer.output.format") or "PARQUET"
    if fmt == "AVRO" and not avro_available(ctx.spark):
        raise ConfigError(
            f"{props.describe('writer.output.format')}: AVRO is not available: this Spark build has no "
            f"{AVRO_FILE_FORMAT} (older Spark versions keep it in the separate spark-avro package, which "
            f"Flowport does not download at run time); use one of "
            f"{', '.join(f for f in ALL_FORMATS if f != 'AVRO')}"
        )
    if fmt == "JDBC":
        return JdbcDataWriter(props, ctx)
    if fmt == "ICEBERG":
        from portal.pipeline.iceberg import IcebergDataWriter  # the Iceberg destination's own module

        return IcebergDataWriter(props, ctx)
    return FileDataWriter(props, ctx, fmt)
