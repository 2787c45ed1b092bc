"""Recovery on the next run: leftover commit steps are verified and redone
before new data is pulled; a dataset whose steps cannot be redone is skipped
(status message, alert event) and the rest of the job goes on.

The worker's `execute_job` runs in-process, end to end: real Spark (the
worker's own SparkSession), real pipeline, real commit path; the pipeline
is wrapped only to record the JobSpecs it ran."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest
from django.conf import settings

from portal.events.models import Event
from portal.orchestration.models import (
    CommitStoreDataset,
    DatasetState,
    JobState,
)
from portal.orchestration.state import publish, recovery
from portal.orchestration.state.commitstore import CommitStepStore, store_name_for
from portal.orchestration.worker import executor
from portal.pipeline.destinations.commit_steps import FsRenameCommitStep
from portal.pipeline.destinations.commitplan import plan_commit
from portal.pipeline.jobspec import JobSpec
from tests.integration.crash_harness import World, compare, read_ids

in_db = pytest.mark.django_db(transaction=True)


def _two_datasets(world: World) -> None:
    for dataset in ("customers", "orders"):
        world.landing.add(dataset, 3)
        world.landing.add(dataset, 2)


@in_db
def test_the_next_run_finishes_the_leftover_steps_before_it_pulls(world):
    _two_datasets(world)
    first = world.new_job()
    assert world.run(first, "after_step:1@orders") == "crashed"
    assert world.pending("orders") is not None
    assert world.exactly_once()[1] > 0  # not all published yet

    recovered_watermark = world.landing.max_watermark("orders")
    world.landing.add("orders", 4)
    second = world.new_job()
    assert world.run(second) == "committed"
    assert world.exactly_once() == (0, 0)
    assert world.watermark("orders") == world.landing.max_watermark("orders")
    assert world.pending("orders") is None
    # The pull of the second run started from the recovered watermark: only the new file.
    assert world.pipeline.specs[-1].previous_watermarks["orders"] == recovered_watermark
    state = JobState.objects.get(job=second, attempt=1)
    assert state.status == "COMMITTED"
    assert state.recovered["orders"]["status"] == "RECOVERED"
    assert state.recovered["orders"]["execution_id"] == first.execution.execution_id
    assert state.recovered["orders"]["executed"] >= 1
    second.refresh_from_db()
    # customers commits in parallel with orders: it may or may not have finished before the crash.
    recovered = sorted(urn for urn, d in state.recovered.items() if d["status"] == "RECOVERED")
    assert "orders" in recovered
    assert (
        f"Finished the commit of {len(recovered)} dataset(s) left by an earlier run first." in second.message
    )
    # The crashed run's task output was cleaned once its steps were all done.
    assert not (world.work / "task-output" / "eo_job" / str(first.execution.execution_id)).exists()
    assert JobState.objects.get(job=first, attempt=1).status == "RUNNING"  # its worker "died"


@in_db
def test_a_redelivered_attempt_recovers_its_own_execution(world):
    _two_datasets(world)
    job = world.new_job()
    assert world.run(job, "before_steps_removed@customers") == "crashed"
    world.redeliver(job)
    assert world.run(job) == "committed"
    assert world.exactly_once() == (0, 0)
    assert world.watermark("customers") == world.landing.max_watermark("customers")
    assert world.watermark("orders") == world.landing.max_watermark("orders")
    assert not (world.work / "task-output" / "eo_job").exists() or not any(
        (world.work / "task-output" / "eo_job").rglob("*.json")
    )
    assert [s.status for s in job.run_states.order_by("attempt")] == ["RUNNING", "COMMITTED"]


@in_db
def test_a_redelivered_attempt_does_not_publish_again_what_its_execution_delivered(world):
    """The rule that fixes issue #45 (a JDBC publish marker is per execution, so a second publish
    of the same execution is taken for the first): the redelivered attempt leaves out what its
    execution already delivered, here finished by its own recovery; a file that landed meanwhile
    waits for the next execution, which publishes it once."""
    _two_datasets(world)
    job = world.new_job()
    assert world.run(job, "after_steps_written@orders") == "crashed"
    late = world.landing.add("orders", 2)  # arrives between the crash and the redelivery
    world.redeliver(job)
    assert world.run(job) == "committed"
    job.refresh_from_db()
    delivered = job.message.split(
        "already delivered by an earlier attempt of this execution, not pulled again: "
    )
    assert "orders" in delivered[1]  # customers may have committed before the crash too
    assert not set(late) & set(read_ids(world.publish / "orders"))  # left for the next execution
    assert not CommitStoreDataset.objects.exists()
    assert world.run(world.new_job()) == "committed"
    assert world.exactly_once() == (0, 0)
    assert world.watermark("orders") == world.landing.max_watermark("orders")


def _steps_that_cannot_be_redone(world: World, dataset: str) -> Path:
    """Leave the dataset's steps stored, then put different content where one publishes."""
    pending = world.pending(dataset)
    first = next(s for s in CommitStepStore().step_dicts(pending.pk) if s["type"] == "fs_rename")
    target = Path(first["dst"])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text('{"id": -1}\n')
    return target


@in_db
def test_a_dataset_whose_steps_cannot_be_redone_is_skipped_and_the_rest_goes_on(world):
    _two_datasets(world)
    first = world.new_job()
    assert world.run(first, "after_steps_written@orders") == "crashed"
    blocker = _steps_that_cannot_be_redone(world, "orders")
    world.landing.add("orders", 2)
    world.landing.add("customers", 2)

    second = world.new_job()
    assert world.run(second) == "failed"  # never COMMITTED while a dataset of it was left behind
    second.refresh_from_db()
    assert second.message.startswith(
        "1 dataset(s) waiting to be finished (orders): not delivered by this run."
    )
    # orders was not pulled at all; customers was.
    assert world.pipeline.specs[-1].properties["source.files.datasets"] == "customers"
    assert compare(world.landing.ids("customers"), read_ids(world.publish / "customers")) == (0, 0)
    pending = world.pending("orders")
    assert pending.redo_failures == 2  # commit.step.max.redo
    assert "different content" in pending.last_error
    assert blocker.read_text() == '{"id": -1}\n'  # never overwritten
    event = Event.objects.get(kind="dataset.skipped")
    assert event.subject == "orders" and "could not be finished after 2 redo(s)" in event.message
    assert event.severity == "ERROR"
    state = DatasetState.objects.get(dataset_urn="orders")
    assert state.last_status == "SKIPPED"
    assert "different content" in state.history.first().reason
    assert JobState.objects.get(job=second).recovered["orders"]["status"] == "SKIPPED"

    # Once the cause is gone, the next run finishes the steps and pulls the rest.
    blocker.unlink()
    third = world.new_job()
    assert world.run(third) == "committed"
    assert world.exactly_once() == (0, 0)
    assert world.watermark("orders") == world.landing.max_watermark("orders")


@in_db
def test_a_job_whose_every_dataset_is_skipped_fails_with_the_reason(world):
    world.landing.add("orders", 3)
    first = world.new_job()
    assert world.run(first, "after_steps_written") == "crashed"
    _steps_that_cannot_be_redone(world, "orders")
    second = world.new_job()
    assert world.run(second) == "failed"
    second.refresh_from_db()
    assert second.message.startswith(
        "1 dataset(s) waiting to be finished (orders): not delivered by this run, nothing else ran."
    )
    assert len(world.pipeline.specs) == 1  # the second run pulled nothing


@in_db
def test_an_attempt_stops_before_pulling_when_its_own_executions_steps_cannot_be_redone(world):
    _two_datasets(world)
    job = world.new_job()
    assert world.run(job, "after_steps_written@orders") == "crashed"
    _steps_that_cannot_be_redone(world, "orders")
    world.redeliver(job)
    assert world.run(job) == "failed"
    job.refresh_from_db()
    assert job.message.startswith("Stopped before pulling data: orders still has commit steps")
    assert len(world.pipeline.specs) == 1
    # Its task output is still there for the steps.
    pending = world.pending("orders")
    sources = [Path(s["src"]) for s in CommitStepStore().step_dicts(pending.pk) if s["type"] == "fs_rename"]
    assert all(p.exists() for p in sources[1:])


@in_db
def test_a_commit_that_fails_keeps_its_steps_and_task_output_for_the_next_run(world, monkeypatch):
    _two_datasets(world)
    real = FsRenameCommitStep.execute
    calls = {"n": 0}

    def flaky(self):
        if "orders" in self.dst:
            calls["n"] += 1
            raise OSError("disk full")
        return real(self)

    monkeypatch.setattr(FsRenameCommitStep, "execute", flaky)
    job = world.new_job()
    assert world.run(job) == "failed"
    job.refresh_from_db()
    assert "commit of orders failed after 2 attempt(s): OSError: disk full" in job.message
    assert calls["n"] == 2
    assert world.pending("orders") is not None and world.pending("customers") is None
    assert JobState.objects.get(job=job).datasets["orders"]["status"] == "COMMIT_FAILED"

    monkeypatch.setattr(FsRenameCommitStep, "execute", real)
    again = world.new_job()
    assert world.run(again) == "committed"
    assert world.exactly_once() == (0, 0)
    assert not (world.work / "task-output" / "eo_job" / str(job.execution.execution_id)).exists()


@in_db
def test_recovery_runs_per_dataset_in_parallel(world, monkeypatch):
    datasets = [f"ds{n:02d}" for n in range(24)]
    for dataset in datasets:
        world.landing.add(dataset, 2)
    world.props["commit.step.parallelism"] = "6"
    job = world.new_job()
    spec = job.spec
    # A run that wrote every dataset's steps and died before running any.
    states = world.pipeline(executor.sparkctx.session_for(settings.SPARK_MASTER), spec)
    plan = plan_commit(spec, states)
    publish.watermark_steps(spec, states, plan)
    store = CommitStepStore()
    for urn, steps in plan.items():
        store.put_all(
            store_name_for(spec),
            urn,
            steps,
            execution_id=spec["execution_id"],
            job_name=spec["job_name"],
            work_dir=spec["work_dir"],
        )

    threads: set[str] = set()
    lock = threading.Lock()
    real = FsRenameCommitStep.execute

    def record(self):
        with lock:
            threads.add(threading.current_thread().name)
        return real(self)

    monkeypatch.setattr(FsRenameCommitStep, "execute", record)
    report = recovery.recover(spec)
    assert sorted(report.recovered) == datasets and not report.skipped
    assert 1 < len(threads) <= 6
    assert world.exactly_once() == (0, 0)
    assert all(world.watermark(d) == world.landing.max_watermark(d) for d in datasets)
    assert not CommitStoreDataset.objects.exists()
    assert not (world.work / "task-output" / "eo_job" / str(spec["execution_id"])).exists()


@in_db
def test_a_superseded_attempt_writes_no_steps_and_publishes_nothing(world):
    _two_datasets(world)
    job = world.new_job()
    spec = job.spec
    states = world.pipeline(executor.sparkctx.session_for(settings.SPARK_MASTER), spec)
    world.redeliver(job)  # the orchestrator gave up on attempt 1 (its lease lapsed)
    results = publish.commit(spec, states, job=job, attempt=1)
    assert all(not r.done and "StaleAttempt" in r.error for r in results.values())
    assert not CommitStoreDataset.objects.exists()
    assert read_ids(world.publish) == [] and not DatasetState.objects.exists()


def files_spec_backfill(root: Path) -> dict:
    return {
        "job_name": "j",
        "backfill": {"a": {"low": None, "high": "z"}},
        "properties": {"source.class": recovery.FILES_SOURCE, "source.files.path": str(root)},
    }


def test_exclude_datasets_narrows_the_source(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    files = {"source.class": recovery.FILES_SOURCE, "source.files.path": str(tmp_path)}
    spec = JobSpec.from_dict({"job_name": "j", "properties": files})
    assert recovery.exclude_datasets(spec, set()) is spec
    assert recovery.exclude_datasets(spec, {"b"}).properties["source.files.datasets"] == "a,c"
    assert spec.properties == files  # not changed in place
    listed = replace(spec, properties={**files, "source.files.datasets": "c, a"})
    assert recovery.exclude_datasets(listed, {"a"}).properties["source.files.datasets"] == "c"
    assert recovery.exclude_datasets(spec, {"a", "b", "c"}) is None
    root = replace(spec, properties={**files, "source.files.dataset.level": "0", "dataset.urn": "all"})
    assert recovery.exclude_datasets(root, {"all"}) is None
    assert recovery.exclude_datasets(root, {"other"}) == root
    jdbc = JobSpec.from_dict(
        {"job_name": "j", "properties": {"source.class": recovery.JDBC_SOURCE, "source.jdbc.tables": "x,y"}}
    )
    assert recovery.exclude_datasets(jdbc, {"x"}).properties["source.jdbc.tables"] == "y"
    assert recovery.exclude_datasets(jdbc, {"x", "y"}) is None
    custom = JobSpec.from_dict({"job_name": "j", "properties": {"source.class": "my.Source"}})
    assert recovery.exclude_datasets(custom, {"x"}) == custom
    # A cdc job reads one log for all its tables: it runs while one is left, not at all after.
    cdc = JobSpec.from_dict(
        {
            "job_name": "j",
            "properties": {"source.class": recovery.cdc.CDC_SOURCE_CLASS, "source.cdc.tables": "s.x,s.y"},
        }
    )
    assert recovery.exclude_datasets(cdc, {"s.x"}) == cdc
    assert recovery.exclude_datasets(cdc, {"s.x", "s.y"}) is None
    backfill = replace(jdbc, backfill={"x": {"low": "1", "high": "9"}, "y": {"low": "1", "high": "9"}})
    narrowed = recovery.exclude_datasets(backfill, {"x"})
    assert list(narrowed.backfill) == ["y"] and narrowed.properties["source.jdbc.tables"] == "y"
    # A backfill whose datasets are all skipped runs nothing (never a normal run).
    assert recovery.exclude_datasets(JobSpec.from_dict(files_spec_backfill(tmp_path)), {"a"}) is None
