"""Run one WorkUnit as a task: extract -> converters -> quality -> fork -> branches -> writers.

Everything up to the writers is a lazy DataFrame over the bounded extract (the work unit's fixed
file list or staged database extract), so every branch sees exactly the same records.  Branches
with nothing of their own but a file writer are written together by one Spark write that reads the
extract once (:mod:`portal.pipeline.onepass`); otherwise each branch is its own Spark write that
re-derives its DataFrame from the extract, which was measured cheaper than ``cache()``.  One branch
taking an Arrow extract unchanged into Parquet is written by the Python workers themselves
(:mod:`portal.pipeline.destinations.directwrite`), never through Spark's rows.  Counts
come from ``DataFrame.observe`` during the writes (or from the one-pass writer itself), so checking
and counting costs no extra pass; which read counts is the feed's business
(:mod:`portal.pipeline.feed`, :mod:`portal.pipeline.observe`), so the steps below read in order.  Configuration of every branch (writer format, required keys,
class paths) is validated before any data is read.

Failure semantics (Gobblin's fork): a failing branch does not stop the others; the task succeeds
only if every branch does; a failed task's task output is removed, so nothing of it can be
published, and its actual high watermark is its low watermark.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructType

from portal.crypto.secretnames import secret_keys
from portal.pipeline import badrows, columns, fs, onepass, progress
from portal.pipeline.converters import Converter, ConverterContext, apply_converters, build_converters
from portal.pipeline.destinations import badtables, directcopy, directwrite
from portal.pipeline.destinations.base import DataWriter, WriterContext, WriteResult
from portal.pipeline.destinations.builder import build_writer
from portal.pipeline.destinations.files import FileDataWriter
from portal.pipeline.destinations.jdbc import JdbcDataWriter
from portal.pipeline.errors import CancelledError, PipelineError, QualityCheckError
from portal.pipeline.feed import Feed
from portal.pipeline.fork import ForkOperator, as_column, build_fork_operator, checked
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.logtag import tag_thread
from portal.pipeline.observe import WRITTEN, observe_written, observed
from portal.pipeline.properties import Properties, branch_names, check_branch_keys
from portal.pipeline.quality import (
    RowChecker,
    TaskCheckContext,
    TaskPolicy,
    build_task_policies,
    parse_schema,
    run_task_policies,
)
from portal.pipeline.schema import evolution as schema_evolution
from portal.pipeline.sources.base import Extraction, Source
from portal.pipeline.taskstate import CANCELLED, FAILED, SKIPPED, SUCCEEDED, BranchState, TaskState
from portal.pipeline.workunits import WorkUnit

log = logging.getLogger(__name__)

TRACEBACK_CHARS = 12_000


@dataclass
class JobContext:
    """Job-wide objects shared by all tasks of one run."""

    spark: SparkSession
    jobspec: JobSpec
    props: Properties
    source: Source
    work_dir: str
    cancel_event: threading.Event = field(default_factory=threading.Event)
    active_groups: set[str] = field(default_factory=set)


def _mask_secrets(text: str, props: Properties) -> str:
    """`text` with the value of every secret of the job (`crypto.secretnames.secret_keys`, the
    rule the pages and the API mask by) replaced by ``***``."""
    for key in secret_keys(props):
        value = props[key]
        if value and len(value) >= 3:
            text = text.replace(value, "***")
    return text


_PYTHON_WORKER = "An exception was thrown from the Python worker"
_RAISED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception): .*)$", re.M)


def describe_exception(exc: BaseException, props: Properties) -> str:
    """A short, secret-free message for an unexpected (Spark/JDBC) exception."""
    text = str(exc).strip() or type(exc).__name__
    if _PYTHON_WORKER in text:  # the error is the traceback's last line, after hundreds of others
        raised = _RAISED.findall(text)
        text = raised[-1] if raised else text
    text = text.split("\n== ")[0].split("\n\tat ")[0].strip()
    text = _mask_secrets(" ".join(text.split())[:800], props)
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, PipelineError) else text


def describe_traceback(exc: BaseException, props: Properties) -> str:
    """The whole traceback of a failure (a JVM error's Java stack included),
    secrets masked, for the attempt's log: the message alone rarely says where."""
    text = "".join(traceback.format_exception(exc)).rstrip()
    if len(text) > TRACEBACK_CHARS:
        text = text[:TRACEBACK_CHARS] + f"\n… ({len(text) - TRACEBACK_CHARS:,} more characters)"
    return _mask_secrets(text, props)


def _thread_setup(spark: SparkSession, group: str, pool: str, log_tag: str) -> None:
    sc = spark.sparkContext
    sc.setJobGroup(group, group, interruptOnCancel=True)
    sc.setLocalProperty("spark.scheduler.pool", pool)
    if log_tag:
        tag_thread(spark, log_tag)


def stage_progress(spark: SparkSession, group: str) -> dict[str, Any]:
    """The TaskState's ``stage_progress``: Spark jobs/stages/tasks run in the task's job group."""
    counts = progress.group_progress(spark, group)
    return {
        "jobs": counts["jobs"],
        "stages": counts["stages_total"],
        "stages_completed": counts["stages_completed"],
        "tasks_total": counts["tasks_total"],
        "tasks_completed": counts["tasks_done"],
        "tasks_failed": counts["tasks_failed"],
    }


@dataclass
class _Branch:
    state: BranchState
    props: Properties
    converters: list[Converter]
    checker: RowChecker
    policies: list[TaskPolicy]
    writer: DataWriter


@dataclass
class _PreFork:
    """The pre-fork stream: its view of the properties, fork operator, converters and checks."""

    props: Properties
    operator: ForkOperator
    converters: list[Converter]
    checker: RowChecker
    policies: list[TaskPolicy]


@dataclass
class _Fork:
    """Where the records go: the branches that get any, each branch's route (and the operator's
    decision it came from), and whether one pass writes them all."""

    active: list[_Branch]
    routes: list[Column]
    decisions: list[Any]
    one_pass: bool
    # The one branch's write that skips Spark's rows (_direct_write), and the schema it writes.
    direct: Callable[[], tuple[WriteResult, int]] | None = None
    schema: StructType | None = None


class TaskRunner:
    """Runs one WorkUnit; :meth:`run` never raises, it returns the TaskState."""

    def __init__(self, job: JobContext, wu: WorkUnit, mwu_info: dict[str, Any]) -> None:
        self.job = job
        self.wu = wu
        spec = job.jobspec
        self.group = progress.job_group(spec.job_name, spec.execution_id, wu.task_id)
        # The FAIR pool: the one the orchestrator names (its owner's, so owners share a worker's
        # Spark fairly), else one per task.
        self.pool = str(spec.extra.get("scheduler_pool") or f"flowport-{wu.task_id}")
        self.state = TaskState(
            task_id=wu.task_id,
            job_name=spec.job_name,
            execution_id=spec.execution_id,
            dataset_urn=wu.dataset_urn,
            low_watermark=wu.low_watermark,
            expected_high_watermark=wu.expected_high_watermark,
            actual_high_watermark=wu.low_watermark,
            multi_work_unit=mwu_info,
            work_unit=wu.describe(),
        )
        self.branches: list[_Branch] = []
        self.extract_dir: str | None = None
        self.limits = badrows.Limits(0, None)

    def run(self) -> TaskState:
        started = time.time()
        self.state.timings["started_at"] = _iso(started)
        _thread_setup(self.job.spark, self.group, self.pool, self.job.jobspec.log_tag)
        self.job.active_groups.add(self.group)
        spec = self.job.jobspec
        progress.task_status(spec.job_name, spec.execution_id, self.wu.task_id, progress.RUNNING)
        try:
            if self.wu.error:
                raise PipelineError(self.wu.error)
            if self.job.cancel_event.is_set():
                raise CancelledError("job cancelled before this work unit started")
            if self.wu.empty:
                self.state.status = SUCCEEDED
            else:
                self._execute(dt.datetime.fromtimestamp(int(started), dt.UTC))
        except BaseException as exc:
            if isinstance(exc, CancelledError) or self.job.cancel_event.is_set():
                self.state.status = CANCELLED
                self.state.error = str(exc) if isinstance(exc, CancelledError) else self._cancelled()
                self.state.actual_high_watermark = self.state.low_watermark
            else:
                self.state.fail(describe_exception(exc, self.job.props))
                self.state.traceback = describe_traceback(exc, self.job.props)
            for branch in self.branches:
                branch.writer.abort()
                if branch.state.status == SUCCEEDED:
                    branch.state.output_files, branch.state.bytes_written = [], 0
            if not isinstance(exc, Exception):
                raise
        finally:
            self.job.active_groups.discard(self.group)
            if self.extract_dir:
                fs.delete(self.extract_dir)
            finished = time.time()
            self.state.timings.update(
                finished_at=_iso(finished), duration_seconds=round(finished - started, 3)
            )
            self.state.stage_progress = stage_progress(self.job.spark, self.group)
            progress.task_status(spec.job_name, spec.execution_id, self.wu.task_id, self.state.status)
        return self.state

    def _cancelled(self) -> str:
        return (
            f"job cancelled while this work unit ran ({self.wu.dataset_urn}): its Spark jobs and "
            "the source's statements were cancelled"
        )

    # -- the pipeline -------------------------------------------------------------------------------

    def _execute(self, ingestion_time: dt.datetime) -> None:
        """extract -> convert -> check -> fork -> write, then the verdicts and the watermark."""
        pre = self._build(ingestion_time)
        recorded = self.job.jobspec.previous_schemas.get(self.wu.dataset_urn)
        extraction = schema_evolution.apply(
            self.job.source.extract(self.wu), recorded, pre.props, self.wu.dataset_urn
        )
        feed = self._extract(extraction, pre)
        check = self._check_schema(feed, pre)
        fork = self._fork(feed, pre, check.schema)
        self._write(feed, fork, check.previous_schema)
        self._check_records(feed, fork, pre, check)
        self._set_aside(feed, fork, pre)
        finish = extraction.finish
        self.state.actual_high_watermark = finish(feed.metrics) if finish else self.wu.expected_high_watermark
        self.state.status = SUCCEEDED

    def _build(self, ingestion_time: dt.datetime) -> _PreFork:
        """The pre-fork stream's and every branch's components, built (so validated) before any data
        is read."""
        pre = self.job.props.pre_fork()
        ctx = ConverterContext(self.wu.task_id, self.wu.dataset_urn, ingestion_time)
        operator = build_fork_operator(pre)
        self._build_branches(pre, operator.get_branches(), ingestion_time, ctx)
        self.limits = badrows.Limits.of(pre)
        rules = columns.converters(pre, ctx, self.job.jobspec.column_key)
        converters = rules + build_converters(pre, ctx)
        return _PreFork(pre, operator, converters, RowChecker(pre), build_task_policies(pre))

    def _extract(self, extraction: Extraction, pre: _PreFork) -> Feed:
        """The work unit's bounded extract with the pre-fork converters and row checker (lazy)."""
        job = self.job
        self.extract_dir = fs.join(
            job.work_dir, "extract", job.jobspec.job_name, str(job.jobspec.execution_id), self.wu.task_id
        )
        return Feed(job.spark, extraction, pre.converters, pre.checker, self.extract_dir)

    def _check_schema(self, feed: Feed, pre: _PreFork) -> TaskCheckContext:
        """The source schema recorded, and the pre-fork task policies' verdict on it."""
        schema = feed.extraction.df.drop(*feed.extraction.helper_columns).schema
        self.state.source_schema = schema.json()
        previous_schema = parse_schema(self.job.jobspec.previous_schemas.get(self.wu.dataset_urn))
        check = TaskCheckContext(self.wu.dataset_urn, "pre-fork", schema, previous_schema, None)
        failure = run_task_policies(pre.policies, check, "before", self.state.quality)
        if failure:
            raise QualityCheckError(failure)
        return check

    def _fork(self, feed: Feed, pre: _PreFork, schema: StructType) -> _Fork:
        """Which branches get records, by which route, and whether one pass writes them all."""
        operator = pre.operator
        forward = checked(operator, operator.fork_schema(schema), "fork_schema")
        decisions = checked(operator, operator.fork_data_records(schema), "fork_data_records")
        active = [b for b in self.branches if forward[b.state.index]]
        for b in self.branches:
            if not forward[b.state.index]:
                b.state.status = SKIPPED
        one_pass = (
            pre.props.get_bool("fork.one.pass", True)
            and not any(b.converters or b.checker.active for b in active)
            and onepass.eligible(self.job.spark, [b.writer for b in active])
        )
        direct = (
            _direct_write(self.job.spark, feed, schema, active[0])
            if _takes_all_unchanged(active, decisions)
            else None
        )
        feed.stage_if_read_twice(0 if one_pass or direct else len(active), [b.checker for b in active])
        return _Fork(active, [as_column(d) for d in decisions], decisions, one_pass, direct, schema)

    def _write(self, feed: Feed, fork: _Fork, previous_schema: StructType | None) -> None:
        """Write the active branches (in one pass when possible, else each its own write, in parallel
        threads); a failed branch fails the task."""
        self._fork_and_write(feed, fork, previous_schema)
        self.state.extract_staged = feed.staged
        failed = [b.state for b in fork.active if b.state.status != SUCCEEDED]
        if failed:
            raise PipelineError("; ".join(f"branch {s.index} ({s.name}) failed: {s.error}" for s in failed))

    def _check_records(self, feed: Feed, fork: _Fork, pre: _PreFork, check: TaskCheckContext) -> None:
        """The records extracted, the pre-fork row policies' verdict (their err file written) and the
        pre-fork task policies' verdict on the records."""
        self.state.records_extracted = feed.records(read=bool(fork.active))
        if pre.checker.active and fork.active:
            reports, rejected, err, fail = pre.checker.outcome(feed.pre_metrics(), "pre", "pre-fork")
            self.state.quality.extend(reports)
            self.state.records_rejected = rejected
            if err:
                self.state.err_dir = self._err_dir(pre.props, "pre_fork")
                pre.checker.err_rows(feed.frame(False)).write.mode("overwrite").json(self.state.err_dir)
            if fail:
                raise QualityCheckError(fail)
        check.records = self.state.records_extracted
        failure = run_task_policies(pre.policies, check, "after", self.state.quality)
        if failure:
            raise QualityCheckError(failure)

    def _set_aside(self, feed: Feed, fork: _Fork, pre: _PreFork) -> None:
        """The rows the source could not read (:mod:`portal.pipeline.badrows`): described by a second
        read when the writes counted any, then beside each file branch's output (published with
        it), and in an error table beside each JDBC or Iceberg destination (published with it,
        :mod:`portal.pipeline.destinations.badtables`); in the err folder instead when past the limits (the task
        fails) or no branch writes files or tables."""
        spec = feed.extraction.bad_records
        if spec is None or not fork.active or not int(feed.metrics.get(badrows.METRIC) or 0):
            return
        job = self.job.jobspec
        context = {
            "job": job.job_name,
            "execution_id": job.execution_id,
            "task_id": self.wu.task_id,
            "dataset_urn": self.wu.dataset_urn,
        }
        rows = badrows.describe(feed.extraction.df, spec, context)
        self.state.records_bad = len(rows)
        if not rows:
            return
        read = self.state.records_extracted + len(rows)
        files = [
            b
            for b in fork.active
            if isinstance(b.writer, FileDataWriter) and b.state.output_dir and b.state.final_dir
        ]
        tables = [b for b in fork.active if badtables.takes(b.writer)]
        if self.limits.passed(len(rows), read) or not (files or tables):
            path = self._err_dir(pre.props, "bad_records.jsonl")
            badrows.write(path, rows)
            self.state.bad_records_files = [path]
            badrows.check(self.limits, rows, read, self.wu.dataset_urn, path)
            return
        name = badrows.file_name(job.execution_id, self.wu.task_id)
        for branch in tables:
            badtables.stage(self.job.spark, branch.writer, branch.state, rows, name)
            self.state.bad_records_tables.append(badtables.where(branch.writer))
        for branch in files:
            assert branch.state.output_dir and branch.state.final_dir
            path = fs.join(branch.state.output_dir, badrows.FOLDER, name)
            branch.state.output_files.append({"path": path, "size": badrows.write(path, rows)})
            final = branch.state.final_dir
            if branch.props.get_bool("data.publisher.dataset.subdir", True):
                final = fs.join(final, self.wu.dataset_urn)
            self.state.bad_records_files.append(fs.join(final, badrows.FOLDER, name))

    def _build_branches(
        self, pre: Properties, count: int, ingestion_time: dt.datetime, ctx: ConverterContext
    ) -> None:
        """Every branch's writer, converters and checks, built (so validated) before any data is read."""
        job, wu, spec = self.job, self.wu, self.job.jobspec
        check_branch_keys(job.props, count)
        for index, name in enumerate(branch_names(pre, count)):
            props = job.props.for_branch(index, count, name)
            writer_ctx = WriterContext(
                job.spark,
                spec,
                wu.task_id,
                wu.dataset_urn,
                index,
                name,
                job.work_dir,
                ingestion_time,
                wu.estimated_bytes,
            )
            writer = build_writer(props, writer_ctx)
            state = BranchState(index, name, format=writer.format, final_dir=writer.final_dir)
            converters, checker = build_converters(props, ctx), RowChecker(props)
            self.branches.append(
                _Branch(state, props, converters, checker, build_task_policies(props), writer)
            )
        self.state.branches = [b.state for b in self.branches]

    def _fork_and_write(self, feed: Feed, fork: _Fork, previous_schema: StructType | None) -> None:
        """Fork the feed to the active branches and write them: in one pass when possible, else each
        branch its own write (in parallel threads); the feed decides which read counts."""
        job, active = self.job, fork.active
        if fork.direct:
            self.state.fork_feed = "direct"
            self._run_direct(active[0], feed, fork, previous_schema)
            return
        if fork.one_pass:
            seen = self._run_one_pass(active, feed.one_pass_frame(), fork.routes, previous_schema)
            if seen is not None:
                self.state.fork_feed = "one_pass"
                feed.read_by_one_pass(seen)
                return
            feed.one_pass_failed(len(active))
        # One branch taking every record unchanged: its written count may be the record count.
        only = active[0] if len(active) == 1 else None
        feed.one_by_one(len(active), _takes_all_unchanged(active, fork.decisions))
        first = active[0] if active else None

        def run_branch(branch: _Branch) -> None:
            _thread_setup(job.spark, self.group, self.pool, job.jobspec.log_tag)
            frame = feed.branch_frame(branch is first)
            self._run_branch(branch, frame, feed.checker, fork.routes[branch.state.index], previous_schema)

        if len(active) > 1:
            self.state.fork_feed = "per_branch"
            with ThreadPoolExecutor(max_workers=len(active), thread_name_prefix="fork") as pool:
                list(pool.map(run_branch, active))
        elif only is not None:
            run_branch(only)
            feed.written(only.state.records_written)

    def _err_dir(self, props: Properties, leaf: str) -> str:
        spec = self.job.jobspec
        root = props.get("qualitychecker.row.err.file") or fs.join(self.job.work_dir, "err")
        return fs.join(root, spec.job_name, str(spec.execution_id), self.wu.task_id, leaf)

    def _run_branch(
        self,
        branch: _Branch,
        df: DataFrame,
        pre_checker: RowChecker,
        route: Column,
        previous_schema: StructType | None,
    ) -> None:
        started = time.time()
        try:
            df = apply_converters(pre_checker.good(df).where(route), branch.converters)
            check = self._branch_check(branch, df.schema, previous_schema)
            failure = run_task_policies(branch.policies, check, "before", self.state.quality)
            if failure:
                raise QualityCheckError(failure)
            tagged = branch.checker.tag(df)
            counted, obs = observe_written(tagged, branch.checker)
            result = branch.writer.write(branch.checker.good(counted))
            self._finish_branch(branch, check, result, observed(obs), tagged)
        except Exception as exc:
            self._branch_failed(branch, exc)
        finally:
            branch.state.duration_seconds = round(time.time() - started, 3)

    def _run_direct(
        self, branch: _Branch, feed: Feed, fork: _Fork, previous_schema: StructType | None
    ) -> None:
        """The one branch written without Spark's rows (:func:`_direct_write`); its written count is
        the record count."""
        started = time.time()
        assert fork.direct is not None and fork.schema is not None
        try:
            check = self._branch_check(branch, fork.schema, previous_schema)
            failure = run_task_policies(branch.policies, check, "before", self.state.quality)
            if failure:
                raise QualityCheckError(failure)
            result, records = fork.direct()
            feed.count_at_writer(records)
            self._finish_branch(branch, check, result, {WRITTEN: records}, None)
        except Exception as exc:
            self._branch_failed(branch, exc)
        finally:
            branch.state.duration_seconds = round(time.time() - started, 3)

    def _run_one_pass(
        self, active: list[_Branch], df: DataFrame, routes: list[Column], previous_schema: StructType | None
    ) -> int | None:
        """Write the active branches in one pass (:mod:`portal.pipeline.onepass`) and return the rows
        it read.  None, with nothing recorded or left behind, when a branch's schema policy fails or
        the pass fails: the caller then runs the branches one by one, so each reports its own outcome."""
        quality: list[dict[str, Any]] = []
        checks = [self._branch_check(b, df.schema, previous_schema) for b in active]
        if any(
            run_task_policies(b.policies, c, "before", quality) for b, c in zip(active, checks, strict=True)
        ):
            return None
        started = time.time()
        try:
            results, seen, written = onepass.write(
                df,
                [routes[b.state.index] for b in active],
                [b.writer for b in active],  # type: ignore[misc]
            )
        except Exception as exc:
            if self.job.cancel_event.is_set():
                for branch in active:
                    self._branch_failed(branch, exc)
                raise CancelledError(self._cancelled()) from exc
            log.warning(
                "one-pass fork of %s failed, writing its branches one by one: %s",
                self.wu.task_id,
                describe_exception(exc, self.job.props),
            )
            return None
        self.state.quality.extend(quality)
        elapsed = round(time.time() - started, 3)
        for branch, check, result, count in zip(active, checks, results, written, strict=True):
            try:
                self._finish_branch(branch, check, result, {WRITTEN: count}, None)
            except Exception as exc:
                self._branch_failed(branch, exc)
            branch.state.duration_seconds = elapsed
        return seen

    def _branch_check(
        self, branch: _Branch, schema: StructType, previous_schema: StructType | None
    ) -> TaskCheckContext:
        scope = f"branch {branch.state.index} ({branch.state.name})"
        return TaskCheckContext(self.wu.dataset_urn, scope, schema, previous_schema, None)

    def _finish_branch(
        self,
        branch: _Branch,
        check: TaskCheckContext,
        result: WriteResult,
        values: dict[str, Any],
        tagged: DataFrame | None,
    ) -> None:
        """Record a branch's written output and counts, then its row and task policies' verdicts."""
        state = branch.state
        state.output_dir, state.output_files = result.output_dir, result.output_files
        state.bytes_written, state.staging_table = result.bytes_written, result.staging_table
        state.records_written = int(values.get(WRITTEN) or 0)
        reports, state.records_rejected, state.records_err_file, fail = branch.checker.outcome(
            values, "row", check.scope
        )
        self.state.quality.extend(reports)
        if state.records_err_file and tagged is not None:
            state.err_dir = self._err_dir(branch.props, f"branch_{state.index}")
            branch.checker.err_rows(tagged).write.mode("overwrite").json(state.err_dir)
        if fail:
            raise QualityCheckError(fail)
        check.records = state.records_written
        failure = run_task_policies(branch.policies, check, "after", self.state.quality)
        if failure:
            raise QualityCheckError(failure)
        state.status = SUCCEEDED

    def _branch_failed(self, branch: _Branch, exc: Exception) -> None:
        state = branch.state
        state.status = CANCELLED if self.job.cancel_event.is_set() else FAILED
        state.error = describe_exception(exc, self.job.props)
        branch.writer.abort()
        state.output_files, state.bytes_written = [], 0


def _direct_write(
    spark: SparkSession, feed: Feed, schema: StructType, branch: _Branch
) -> Callable[[], tuple[WriteResult, int]] | None:
    """The one branch's write that skips Spark's rows, where the feed is plain and a route takes it:
    Parquet from an Arrow extract (:mod:`portal.pipeline.destinations.directwrite`), or a
    database's own text copied into a staging table of that database
    (:mod:`portal.pipeline.destinations.directcopy`)."""
    if not feed.plain:
        return None
    x, writer = feed.extraction, branch.writer
    if directwrite.eligible(spark, x.arrow, schema, writer):
        assert x.arrow is not None and isinstance(writer, FileDataWriter)
        scan = x.arrow
        return lambda: directwrite.write(spark, scan, writer)
    if directcopy.eligible(x.text, schema, writer):
        assert x.text is not None and isinstance(writer, JdbcDataWriter)
        text = x.text
        return lambda: directcopy.write(text, writer)
    return None


def _takes_all_unchanged(active: list[_Branch], decisions: list[Any]) -> bool:
    """Whether the task has one active branch and it takes every record as the feed gives it (no
    route, converters or row checks of its own)."""
    if len(active) != 1:
        return False
    only = active[0]
    return decisions[only.state.index] is True and not only.converters and not only.checker.active


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="milliseconds")
