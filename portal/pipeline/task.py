"""Run one WorkUnit as a task: extract -> converters -> quality -> fork -> branches -> writers.

Everything up to the writers is a lazy DataFrame over the bounded extract (the work unit's fixed
file list or staged database extract), so every branch sees exactly the same records.  Branches
with nothing of their own but a file writer are written together by one Spark write that reads the
extract once (:mod:`portal.pipeline.onepass`); otherwise each branch is its own Spark write that
re-derives its DataFrame from the extract, which was measured cheaper than ``cache()``.  Counts
come from ``DataFrame.observe`` during the writes (or from the one-pass writer itself), so checking
and counting costs no extra pass.  Configuration of every branch (writer format, required keys,
class paths) is validated before any data is read.

Failure semantics (the fork seed's): a failing branch does not stop the others; the task succeeds
only if every branch does; a failed task's task output is removed, so nothing of it can be
published, and its actual high watermark is its low watermark.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from portal.pipeline import fs, onepass, progress
from portal.pipeline.converters import Converter, ConverterContext, apply_converters, build_converters
from portal.pipeline.errors import CancelledError, PipelineError, QualityCheckError
from portal.pipeline.feed import Feed, reads_twice
from portal.pipeline.fork import as_column, build_fork_operator, checked
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.logtag import tag_thread
from portal.pipeline.observe import observed
from portal.pipeline.properties import Properties, branch_names, check_branch_keys
from portal.pipeline.quality import (
    RowChecker,
    TaskCheckContext,
    TaskPolicy,
    build_task_policies,
    parse_schema,
    run_task_policies,
)
from portal.pipeline.sources.base import Source
from portal.pipeline.taskstate import CANCELLED, FAILED, SKIPPED, SUCCEEDED, BranchState, TaskState
from portal.pipeline.workunits import WorkUnit
from portal.pipeline.writers import DataWriter, WriterContext, WriteResult, build_writer

log = logging.getLogger(__name__)

SECRET_MARKERS = ("password", "secret", "token", "credential")
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
    for key, value in props.items():
        if value and len(value) >= 3 and any(marker in key.lower() for marker in SECRET_MARKERS):
            text = text.replace(value, "***")
    return text


def describe_exception(exc: BaseException, props: Properties) -> str:
    """A short, secret-free message for an unexpected (Spark/JDBC) exception."""
    text = str(exc).strip() or type(exc).__name__
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


class TaskRunner:
    """Runs one WorkUnit; :meth:`run` never raises, it returns the TaskState."""

    def __init__(self, job: JobContext, wu: WorkUnit, mwu_info: dict[str, Any]) -> None:
        self.job = job
        self.wu = wu
        spec = job.jobspec
        self.group = progress.job_group(spec.job_name, spec.execution_id, wu.task_id)
        self.pool = f"flowport-{wu.task_id}"
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
                self.state.error = str(exc) if isinstance(exc, CancelledError) else "job cancelled"
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

    # -- the pipeline -------------------------------------------------------------------------------

    def _execute(self, ingestion_time: dt.datetime) -> None:
        """extract -> convert -> check -> fork -> write, then the counts, verdicts and watermark."""
        job, wu = self.job, self.wu
        pre = job.props.pre_fork()
        ctx = ConverterContext(wu.task_id, wu.dataset_urn, ingestion_time)
        operator = build_fork_operator(pre)
        self._build_branches(pre, operator.get_branches(), ingestion_time, ctx)
        pre_converters = build_converters(pre, ctx)
        pre_checker = RowChecker(pre)
        pre_policies = build_task_policies(pre)  # every branch's and the job's configuration checked

        extraction = job.source.extract(wu)
        self.extract_dir = fs.join(
            job.work_dir, "extract", job.jobspec.job_name, str(job.jobspec.execution_id), wu.task_id
        )
        feed = Feed(job.spark, extraction, pre_converters, pre_checker, self.extract_dir)
        schema = extraction.df.drop(*extraction.helper_columns).schema
        self.state.source_schema = schema.json()
        previous_schema = parse_schema(job.jobspec.previous_schemas.get(wu.dataset_urn))
        check = TaskCheckContext(wu.dataset_urn, "pre-fork", schema, previous_schema, None)
        failure = run_task_policies(pre_policies, check, "before", self.state.quality)
        if failure:
            raise QualityCheckError(failure)

        forward = checked(operator, operator.fork_schema(schema), "fork_schema")
        decisions = checked(operator, operator.fork_data_records(schema), "fork_data_records")
        routes = [as_column(d) for d in decisions]
        active = [b for b in self.branches if forward[b.state.index]]
        for b in self.branches:
            if not forward[b.state.index]:
                b.state.status = SKIPPED
        one_pass = (
            pre.get_bool("fork.one.pass", True)
            and not any(b.converters or b.checker.active for b in active)
            and onepass.eligible(job.spark, [b.writer for b in active])
        )
        # A second read of a live table could see different rows than the first: stage the extract
        # once when this task would read it twice (see portal.pipeline.feed), never otherwise.
        if extraction.stage and reads_twice(
            0 if one_pass else len(active), [pre_checker, *self._checkers(active)]
        ):
            feed.stage()

        self._fork_and_write(feed, active, routes, decisions, one_pass, previous_schema)
        self.state.extract_staged = feed.staged
        failed = [b.state for b in active if b.state.status != SUCCEEDED]
        if failed:
            raise PipelineError("; ".join(f"branch {s.index} ({s.name}) failed: {s.error}" for s in failed))

        if active:
            feed.collect()
        self.state.records_extracted = feed.records
        if pre_checker.active and active:
            reports, rejected, err, fail = pre_checker.outcome(feed.pre_metrics(), "pre", "pre-fork")
            self.state.quality.extend(reports)
            self.state.records_rejected = rejected
            if err:
                self.state.err_dir = self._err_dir(pre, "pre_fork")
                pre_checker.err_rows(feed.frame(False)).write.mode("overwrite").json(self.state.err_dir)
            if fail:
                raise QualityCheckError(fail)
        check.records = self.state.records_extracted
        failure = run_task_policies(pre_policies, check, "after", self.state.quality)
        if failure:
            raise QualityCheckError(failure)
        finish = extraction.finish
        self.state.actual_high_watermark = finish(feed.metrics) if finish else wu.expected_high_watermark
        self.state.status = SUCCEEDED

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

    @staticmethod
    def _checkers(branches: list[_Branch]) -> list[RowChecker]:
        return [b.checker for b in branches]

    def _fork_and_write(
        self,
        feed: Feed,
        active: list[_Branch],
        routes: list[Column],
        decisions: list[Any],
        one_pass: bool,
        previous_schema: Any,
    ) -> None:
        """Fork the feed to the active branches and write them: in one pass when possible, else each
        branch its own write (in parallel threads); counts recorded on the pass that reads."""
        job = self.job
        if one_pass:
            seen = self._run_one_pass(
                active, feed.checker.good(feed.frame(not feed.plain)), routes, previous_schema
            )
            if seen is not None:
                self.state.fork_feed = "one_pass"
                if feed.plain:
                    feed.count_at_writer(seen)
                return
            feed.renew()
            if feed.extraction.stage and len(active) > 1:
                feed.stage()  # the branches now re-read: see _execute
        # One branch taking every record unchanged: its written count is the record count.
        only = active[0] if len(active) == 1 else None
        counted_by_writer = (
            only is not None
            and feed.plain
            and decisions[only.state.index] is True
            and not only.converters
            and not only.checker.active
        )
        first = active[0] if active else None

        def run_branch(branch: _Branch) -> None:
            _thread_setup(job.spark, self.group, self.pool, job.jobspec.log_tag)
            frame = feed.frame(branch is first and not counted_by_writer)
            self._run_branch(branch, frame, feed.checker, routes[branch.state.index], previous_schema)

        if len(active) > 1:
            self.state.fork_feed = "per_branch"
            with ThreadPoolExecutor(max_workers=len(active), thread_name_prefix="fork") as pool:
                list(pool.map(run_branch, active))
        elif only is not None:
            run_branch(only)
            if counted_by_writer:
                feed.count_at_writer(only.state.records_written)

    def _err_dir(self, props: Properties, leaf: str) -> str:
        spec = self.job.jobspec
        root = props.get("qualitychecker.row.err.file") or fs.join(self.job.work_dir, "err")
        return fs.join(root, spec.job_name, str(spec.execution_id), self.wu.task_id, leaf)

    def _run_branch(
        self, branch: _Branch, df: DataFrame, pre_checker: RowChecker, route: Column, previous_schema: Any
    ) -> None:
        started = time.time()
        try:
            df = apply_converters(pre_checker.good(df).where(route), branch.converters)
            check = self._branch_check(branch, df.schema, previous_schema)
            failure = run_task_policies(branch.policies, check, "before", self.state.quality)
            if failure:
                raise QualityCheckError(failure)
            tagged = branch.checker.tag(df)
            obs = Observation()
            written = (
                F.count(F.lit(1))
                if not branch.checker.active
                else F.sum(F.when(F.col("fp_reject_index").isNull(), 1).otherwise(0))
            )
            metrics = [written.alias("fp_written")] + [
                c.alias(n) for n, c in branch.checker.metrics("row").items()
            ]
            result = branch.writer.write(branch.checker.good(tagged.observe(obs, *metrics)))
            self._finish_branch(branch, check, result, observed(obs), tagged)
        except Exception as exc:
            self._branch_failed(branch, exc)
        finally:
            branch.state.duration_seconds = round(time.time() - started, 3)

    def _run_one_pass(
        self, active: list[_Branch], df: DataFrame, routes: list[Column], previous_schema: Any
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
                raise CancelledError("job cancelled") from exc
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
                self._finish_branch(branch, check, result, {"fp_written": count}, None)
            except Exception as exc:
                self._branch_failed(branch, exc)
            branch.state.duration_seconds = elapsed
        return seen

    def _branch_check(self, branch: _Branch, schema: Any, previous_schema: Any) -> TaskCheckContext:
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
        state.records_written = int(values.get("fp_written") or 0)
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


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="milliseconds")
