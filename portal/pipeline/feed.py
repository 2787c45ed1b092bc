"""The feed of one task: its bounded extract with the pre-fork converters and row checker applied —
the lazy DataFrame every branch derives from — and how it is read and counted.

Read once.  The writes themselves read the extract; nothing is read ahead of them.  A source whose
second read could see different rows (a live database table: ``Extraction.stage``) is staged to
Parquet first only when the task *would* read it more than once (:func:`reads_twice`): several
branches written one by one (each re-derives its DataFrame), or an err file (the rows a row policy
rejected are written by a second read, after the verdict).  Those reads then all see one staged
copy, so every branch, the err file, the counts and the watermark agree.  One branch, or the
one-pass fork, reads the database once and stages nothing.

Counted on the way.  Every count is an aggregation observed (``DataFrame.observe``) on the pass that
reads the data.  When nothing can drop or add a row between the extract and the writer
(:attr:`Feed.plain`), the extract is not observed at all: the writer's own count is the record
count (the single branch's written rows, or the rows the one-pass fork read).  The task asks the
feed for the frame each write reads and tells it what the write counted; which read counts is
decided here, never in the task's steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from portal.pipeline.converters import Converter, apply_converters
from portal.pipeline.observe import observed
from portal.pipeline.quality import RowChecker
from portal.pipeline.sources.base import Extraction

RECORDS = "fp_records"


def reads_twice(branches_one_by_one: int, checkers: Sequence[RowChecker]) -> bool:
    """Whether a task reads its extract more than once: ``branches_one_by_one`` branches each
    re-deriving it (more than one), or a row checker writing the rows it rejected to an err file."""
    return branches_one_by_one > 1 or any(c.has_err_file for c in checkers)


class Feed:
    """See the module docstring.  ``frame(observe=True)`` is asked of exactly one read: the one that
    counts (the first branch's write, the one-pass write, or the stage write)."""

    def __init__(
        self,
        spark: SparkSession,
        extraction: Extraction,
        converters: list[Converter],
        checker: RowChecker,
        stage_dir: str,
    ) -> None:
        self.spark = spark
        self.extraction = extraction
        self.converters = converters
        self.checker = checker
        self.stage_dir = stage_dir
        self.staged = False
        self.metrics: dict[str, Any] = {}
        self._extract_obs, self._pre_obs = Observation(), Observation()
        self._writer_counts = False  # the one branch written one by one counts the records

    @property
    def plain(self) -> bool:
        """Nothing between the extract and the writer drops, adds or watches rows: count at the writer."""
        x = self.extraction
        return (
            not self.staged
            and x.keep is None
            and not x.metrics
            and not self.converters
            and not self.checker.active
        )

    def stage_if_read_twice(self, branches_one_by_one: int, branch_checkers: Sequence[RowChecker]) -> None:
        """Stage a live source's extract once when the task would read it twice (:func:`reads_twice`:
        a second read of a live table could see different rows than the first), never otherwise."""
        if self.extraction.stage and reads_twice(branches_one_by_one, [self.checker, *branch_checkers]):
            self.stage()

    def one_pass_frame(self) -> DataFrame:
        """The good rows for the one-pass fork, whose read counts (observed unless :attr:`plain`)."""
        return self.checker.good(self.frame(not self.plain))

    def read_by_one_pass(self, seen: int) -> None:
        """The one-pass fork read ``seen`` rows: the record count of a :attr:`plain` feed."""
        if self.plain:
            self.count_at_writer(seen)

    def one_pass_failed(self, branches: int) -> None:
        """The one-pass fork failed and ``branches`` now re-read the feed: fresh observations, and a
        live source's extract staged (once) when more than one branch re-reads it."""
        self.renew()
        if self.extraction.stage and branches > 1 and not self.staged:
            self.stage()

    def one_by_one(self, branches: int, takes_all_unchanged: bool) -> None:
        """Before ``branches`` are written one by one, decide who counts the records: the writer
        when one branch takes every record unchanged from a :attr:`plain` feed, else the first
        branch's read."""
        self._writer_counts = branches == 1 and takes_all_unchanged and self.plain

    def branch_frame(self, first: bool) -> DataFrame:
        """The frame a branch written one by one derives from; the first one's read counts."""
        return self.frame(first and not self._writer_counts)

    def written(self, records: int) -> None:
        """A branch written one by one wrote ``records``: the record count when the writer counts."""
        if self._writer_counts:
            self.count_at_writer(records)

    def stage(self) -> None:
        """Read the extract once into Parquet (observing its metrics); later reads read that copy."""
        self.renew()
        self._extracted(observe=True).write.mode("overwrite").parquet(self.stage_dir)
        self.metrics = observed(self._extract_obs)
        self.staged = True

    def renew(self) -> None:
        """Fresh observations: an Observation observes one Dataset only, and an abandoned pass's
        never completes."""
        self._extract_obs, self._pre_obs = Observation(), Observation()

    def frame(self, observe: bool) -> DataFrame:
        """The pre-fork DataFrame, tagged by the pre-fork row checker (branches take its good rows)."""
        df = self.spark.read.parquet(self.stage_dir) if self.staged else self._extracted(observe)
        df = self.checker.tag(apply_converters(df, self.converters))
        if observe and self.checker.active:
            df = df.observe(self._pre_obs, *[c.alias(n) for n, c in self.checker.metrics("pre").items()])
        return df

    def count_at_writer(self, records: int) -> None:
        """The writer's count is the record count (:attr:`plain` feeds, read unobserved)."""
        self.metrics[RECORDS] = records

    def records(self, read: bool) -> int:
        """After the writes: the records the task extracted (``read``: a write read the feed).  The
        extract's observed metrics are collected unless staged or counted at the writer."""
        if read and not self.staged and RECORDS not in self.metrics:
            self.metrics.update(observed(self._extract_obs))
        return int(self.metrics.get(RECORDS) or 0)

    def pre_metrics(self) -> dict[str, Any]:
        return observed(self._pre_obs)

    def _extracted(self, observe: bool) -> DataFrame:
        x = self.extraction
        df = x.df
        if observe:
            count = F.count(F.lit(1)) if x.keep is None else F.sum(F.when(x.keep, 1).otherwise(0))
            metrics = [count.alias(RECORDS)] + [c.alias(n) for n, c in x.metrics.items()]
            df = df.observe(self._extract_obs, *metrics)
        if x.keep is not None:
            df = df.where(x.keep)
        return df.drop(*x.helper_columns)
