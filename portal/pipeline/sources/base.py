"""The Source contract (Gobblin's Source + Extractor, on Spark DataFrames).

A Source is constructed once per job with a :class:`SourceContext` and asked for WorkUnits; then
:meth:`Source.extract` is called once per WorkUnit and returns an :class:`Extraction` — a *lazy*
DataFrame bounded by the work unit's watermark range (nothing is read until the writers run).

Write your own by subclassing :class:`Source` and naming it in ``source.class``::

    class NumbersSource(Source):
        def get_work_units(self):
            low = int(self.previous_watermark("numbers") or 0)
            high = low + self.props.get_int("numbers.per.run", 100)
            return [WorkUnit("numbers", str(low), str(high))]

        def extract(self, wu):
            return Extraction(self.spark.range(int(wu.low_watermark) + 1, int(wu.expected_high_watermark) + 1))

Rules a Source must follow: the DataFrame holds exactly the rows in (low, expected high]; planning
errors that concern one dataset are returned as a WorkUnit with ``error`` set (so that dataset's task
fails with the message while the other datasets run); a dataset with nothing new still gets an
``empty`` WorkUnit (low = expected high) so its state is carried forward.

Backfill (``JobSpec.backfill``): in a backfill job :meth:`Source.wanted` is False for every dataset
the backfill does not list (plan nothing for them; the runner drops them anyway),
:meth:`Source.previous_watermark` returns the backfill's ``low`` instead of the stored watermark, and
:meth:`Source.backfill_high` gives the requested upper bound: plan ``(low, min(high, what the source
holds)]``.  A source that ignores ``backfill_high`` would read past the requested range.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructType

from portal.pipeline.badrows import BadRecords
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.properties import Properties
from portal.pipeline.workunits import WorkUnit


@dataclass
class SourceContext:
    """What a Source gets: the session, the JobSpec and the pre-fork property view."""

    spark: SparkSession
    jobspec: JobSpec
    props: Properties
    work_dir: str


@dataclass
class Extraction:
    """A bounded, lazy extract of one WorkUnit.

    ``metrics`` are aggregations observed on ``df`` during the (single) pass that reads it;
    ``keep`` filters the rows to deliver after the metrics saw them (look-back de-duplication);
    ``arrow``, where set, is the same rows as Arrow batches that each Spark task can read itself (so
    a writer that takes Arrow can skip Spark's rows: :mod:`portal.pipeline.destinations.directwrite`);
    ``text``, where set, is the same rows as one database prints its values (a destination of that
    database takes them as they are: :mod:`portal.pipeline.destinations.directcopy`);
    ``helper_columns`` are dropped after ``keep``; ``finish`` computes the actual high watermark from
    the observed metrics once the work unit succeeded (default: the expected high); ``stage`` asks the
    runtime to read the extract once into Parquet before any branch consumes it (a database must not
    be queried once per branch, and two queries may see different rows); ``bad_records``, where set,
    says which rows the source could not read (``keep`` leaves them out, ``metrics`` counts them:
    :mod:`portal.pipeline.badrows`).
    """

    df: DataFrame
    metrics: dict[str, Column] = field(default_factory=dict)
    keep: Column | None = None
    helper_columns: list[str] = field(default_factory=list)
    finish: Callable[[dict[str, Any]], str | None] | None = None
    stage: bool = False
    arrow: ArrowScan | None = None
    text: TextScan | None = None
    bad_records: BadRecords | None = None


# A field's metadata key: the source column's own SQL type where Spark has no type that holds it
# (json, uuid, time, ...; the values are that type's text), kept by a PostgreSQL destination.
SQL_TYPE = "sql_type"


@dataclass(frozen=True)
class TextScan:
    """An extract of ``schema`` whose values are ``dialect``'s own text forms (and Arrow-typed
    columns a CSV prints as that database reads them), in Parquet files on the driver's disk:
    ``columns`` of ``paths``, in ``schema``'s order."""

    dialect: str
    paths: list[str]
    columns: list[str]
    schema: StructType


class SliceReader(Protocol):
    """Reads numbered slices of an extract as Arrow record batches, in a Python worker (so it must
    pickle: Spark ships it to the tasks)."""

    def batches(self, numbers: Iterable[int]) -> Iterator[Any]: ...


@dataclass(frozen=True)
class ArrowScan:
    """An extract readable as Arrow inside Spark tasks: task ``i`` of ``slices`` reads
    ``reader.batches([i])``, whose batches have ``schema``'s columns, types and order."""

    slices: int
    reader: SliceReader
    schema: StructType

    def frame(self, spark: SparkSession) -> DataFrame:
        """The scan as a DataFrame: one Spark task per slice, its batches handed to Spark as they are."""

        def read(numbers: Iterator[Any]) -> Iterator[Any]:
            return self.reader.batches(n for batch in numbers for n in batch.column(0).to_pylist())

        return spark.range(0, self.slices, 1, self.slices).mapInArrow(read, self.schema)


class Source(ABC):
    """Base class of all sources; see the module docstring."""

    def __init__(self, context: SourceContext) -> None:
        self.context = context
        self.spark = context.spark
        self.props = context.props
        self.jobspec = context.jobspec

    def previous_watermark(self, dataset_urn: str) -> str | None:
        """The actual high watermark the last committed run checked in for this dataset; in a
        backfill job, the backfill's ``low`` for it (the stored watermark is ignored)."""
        if self.jobspec.is_backfill:
            bounds = self.jobspec.backfill.get(dataset_urn) or {}
            return bounds.get("low") or None
        value = self.jobspec.previous_watermarks.get(dataset_urn)
        return value if value not in (None, "") else None

    def wanted(self, dataset_urn: str) -> bool:
        """Whether this run pulls the dataset: always, except in a backfill job (listed ones only)."""
        return not self.jobspec.is_backfill or dataset_urn in self.jobspec.backfill

    def backfill_high(self, dataset_urn: str) -> str | None:
        """The inclusive upper bound a backfill job asks for this dataset (None: not a backfill)."""
        bounds = self.jobspec.backfill.get(dataset_urn) if self.jobspec.is_backfill else None
        return bounds.get("high") if bounds else None

    @abstractmethod
    def get_work_units(self) -> list[WorkUnit]:
        """One or more WorkUnits per dataset (see the rules in the module docstring)."""

    @abstractmethod
    def extract(self, work_unit: WorkUnit) -> Extraction:
        """The lazy DataFrame of one WorkUnit's watermark range."""

    def cancel_statements(self) -> None:
        """The job was killed: stop what this source's server is still running for it (called from
        another thread while planning or a work unit runs). Spark's own jobs are cancelled by the
        runner; a source that sends statements to a server cancels them here
        (:mod:`portal.pipeline.cancelling`)."""
        return None
