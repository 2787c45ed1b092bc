"""One-pass fork: every branch of a task written by one Spark job that reads the records once.

Re-deriving each branch from the bounded extract decodes the source once per branch; on a 2-core
machine plain Spark's three filtered re-reads into Parquet / ORC / JSON cost 1.6-1.9x its own
single copy.  Here the records are read once; each row carries a bitmask of the branches whose
route it matches, and ``flowport.pipeline.ForkFileFormat`` (``jvm/ForkFileFormat.java``, built by
``make`` into ``jvm/flowport-pipeline.jar``) hands it to the writer of every such branch, each in
its own format, inside the write's task attempt folder: Spark's commit protocol keeps or discards all
branches' files together, and the branches see exactly the same records.

A task takes this path when (:func:`eligible`) it has 2 to 63 active branches, each written by
Flowport's file writer with no partition columns, ``writer.target.file.size`` or
``writer.file.max.records`` (settings of a whole Spark write), none with converters or row quality
checkers of its own (those are DataFrame transforms per branch), all with the same staging root,
the jar on Spark's classpath and ``fork.one.pass`` not ``false``.  Otherwise, or when the one pass
fails (a format that cannot write the schema, a full disk, ...), the branches re-read, so each
reports its own outcome.  A branch that receives no record still gets a file with its schema.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from portal.pipeline import fs
from portal.pipeline.destinations.base import DataWriter, WriteResult
from portal.pipeline.destinations.files import FileDataWriter
from portal.pipeline.spark import gateway

FORK_FILE_FORMAT = "flowport.pipeline.ForkFileFormat"
MASK_COLUMN = "fp_fork_mask"
COUNTS_DIR = "_fork_counts"  # ForkFileFormat's per-task counts, inside the write's output folder
MAX_BRANCHES = 63  # one bit each in a signed 64-bit mask
_LOADABLE: dict[str, bool] = {}


def available(spark: SparkSession) -> bool:
    """Whether this session's JVM has ``ForkFileFormat`` (asked once per SparkContext)."""
    app = spark.sparkContext.applicationId
    if app not in _LOADABLE:
        try:
            _LOADABLE[app] = bool(
                gateway.jvm(spark).org.apache.spark.util.Utils.classIsLoadable(FORK_FILE_FORMAT)
            )
        except Exception:
            _LOADABLE[app] = False
    return _LOADABLE[app]


def eligible(spark: SparkSession, writers: Sequence[DataWriter]) -> bool:
    """Whether the active branches' ``writers`` can share one pass; the caller has checked that no
    branch has converters or row checkers of its own and that ``fork.one.pass`` is on.  Whether each
    format can write the schema is checked by the format itself, as Spark checks a write's format."""
    files = [w for w in writers if type(w) is FileDataWriter and w.plain]
    if len(files) != len(writers) or not 2 <= len(files) <= MAX_BRANCHES:
        return False
    return len({_parent(w.staging_dir) for w in files}) == 1 and available(spark)


def write(
    df: DataFrame, routes: Sequence[Column], writers: Sequence[FileDataWriter]
) -> tuple[list[WriteResult], int, list[int]]:
    """Write ``df`` once: a row goes to ``writers[i]`` where ``routes[i]`` holds.  Returns each
    branch's task output, the rows read and each branch's record count (counted by the writer
    itself, which costs far less than observing the write); raises, leaving nothing staged, if the
    pass failed."""
    staging = fs.join(_parent(writers[0].staging_dir), "fork")
    mask = sum((F.when(route, F.lit(1 << i)).otherwise(F.lit(0)) for i, route in enumerate(routes)), F.lit(0))
    out = df.withColumn(MASK_COLUMN, mask.cast("long")).write.format(FORK_FILE_FORMAT).mode("overwrite")
    out = out.option("fork.branches", str(len(writers))).option("fork.mask.column", MASK_COLUMN)
    for i, writer in enumerate(writers):
        out = out.option(f"fork.branch.format.{i}", writer.spark_format)
        out = out.option(f"fork.branch.dir.{i}", f"branch_{i}")
        for key, value in writer.spark_options().items():
            out = out.option(f"fork.branch.option.{i}.{key}", value)
    try:
        out.save(staging)
        totals = [0] * (len(writers) + 1)
        for info in fs.list_files(fs.join(staging, COUNTS_DIR)):  # one line per committed Spark task
            totals = [a + int(b) for a, b in zip(totals, fs.read_text(info.path).split(), strict=True)]
        results = [w.collect(fs.join(staging, f"branch_{i}")) for i, w in enumerate(writers)]
    finally:
        fs.delete(staging)
    return results, totals[0], totals[1:]


def _parent(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[0]
