"""The CommitStepStore (Gobblin's interface, in the DB), the CommitSequence
(verify, else execute; then remove), failpoints, and idempotence."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from django.db import connection

from portal.orchestration.models import CommitStepRecord, CommitStore, CommitStoreDataset, DatasetState
from portal.orchestration.state import commitstore
from portal.orchestration.state.commitstore import (
    CommitSequence,
    CommitStepsPending,
    CommitStepStore,
    FailpointCrash,
    StaleAttempt,
    arm,
    failpoint,
    parallel_map,
)
from portal.pipeline.destinations.commit_steps import CommitStep, FsRenameCommitStep
from portal.pipeline.errors import CommitConflictError

STORE = "g/f/job"


def _file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _renames(tmp_path: Path, n: int, dataset: str = "ds") -> tuple[list[dict], list[Path], list[Path]]:
    srcs = [_file(tmp_path / "task-output" / dataset / f"part-{i}.json", f"row {i}\n") for i in range(n)]
    dsts = [tmp_path / "job-output" / dataset / f"part-{i}.json" for i in range(n)]
    steps = [
        FsRenameCommitStep(str(s), str(d), s.stat().st_size).to_dict()
        for s, d in zip(srcs, dsts, strict=True)
    ]
    return steps, srcs, dsts


def _watermark(value: str, execution_id: int = 7, urn: str = "ds") -> dict:
    return {
        "type": "high_watermark",
        "flow_group": "g",
        "flow_name": "f",
        "job_name": "job",
        "dataset_urn": urn,
        "value": value,
        "execution_id": execution_id,
        "records": 3,
    }


@pytest.fixture(autouse=True)
def _no_failpoints():
    commitstore.reset_failpoints()
    yield
    commitstore.reset_failpoints()


# --- Gobblin's interface ----------------------------------------------------------------


@pytest.mark.django_db
def test_create_exists_put_get_remove_as_in_the_seed(tmp_path):
    store = CommitStepStore()
    assert store.create(STORE) is True
    assert store.create(STORE) is False
    assert store.exists(STORE, "ds") is False
    assert store.create(STORE, "ds") is True
    assert store.create(STORE, "ds") is False
    assert store.exists(STORE, "ds") is True

    steps, _, dsts = _renames(tmp_path, 2)
    for step in steps:
        assert store.put(STORE, "ds", CommitStep.from_dict(step)) is True
    assert store.put(STORE, "ds", _watermark("10")) is True
    sequence = store.get_commit_sequence(STORE, "ds")
    assert [s.type for s in sequence.steps] == ["fs_rename", "fs_rename", "high_watermark"]
    assert (sequence.store_name, sequence.dataset_urn) == (STORE, "ds")

    assert sequence.commit() is True
    assert store.exists(STORE, "ds") is False
    assert all(d.exists() for d in dsts)
    assert DatasetState.objects.get(dataset_urn="ds").watermark == "10"
    assert store.get_commit_sequence(STORE, "ds") is None
    assert store.remove(STORE, "ds") is False

    store.put(STORE, "other", _watermark("1", urn="other"))
    assert store.remove(STORE) is True
    assert not CommitStore.objects.exists() and not CommitStepRecord.objects.exists()


@pytest.mark.django_db
def test_put_all_writes_every_step_in_one_transaction_or_none(tmp_path):
    store = CommitStepStore()
    steps, _, _ = _renames(tmp_path, 3)
    token = store.put_all(STORE, "ds", [*steps, _watermark("5")], execution_id=7, attempt=2, job_name="job")
    row = CommitStoreDataset.objects.get(pk=token)
    assert (row.execution_id, row.attempt, row.steps.count()) == (7, 2, 4)
    assert [r.step["type"] for r in row.steps.order_by("position")] == ["fs_rename"] * 3 + ["high_watermark"]

    # A dataset with unfinished steps refuses new ones: they must be finished first.
    with pytest.raises(CommitStepsPending, match="unfinished commit steps"):
        store.put_all(STORE, "ds", [_watermark("6")])
    assert CommitStepRecord.objects.count() == 4

    # A superseded attempt (the fence says no) writes nothing at all.
    with pytest.raises(StaleAttempt):
        store.put_all(STORE, "late", [_watermark("1", urn="late")], fence=lambda: False)
    assert not store.exists(STORE, "late")


@pytest.mark.django_db
def test_remove_with_a_token_never_removes_another_runs_steps():
    store = CommitStepStore()
    first = store.put_all(STORE, "ds", [_watermark("1")])
    assert store.remove(STORE, "ds", token=first) is True
    second = store.put_all(STORE, "ds", [_watermark("2")])
    # A late runner of the first sequence must not delete the second's steps.
    assert store.remove(STORE, "ds", token=first) is False
    assert store.exists(STORE, "ds")
    assert store.remove(STORE, "ds", token=second) is True


@pytest.mark.django_db
def test_secrets_are_named_by_property_and_resolved_from_the_jobs_properties():
    store = CommitStepStore()
    step = {
        "type": "jdbc_publish",
        "dataset_urn": "t",
        "url": "jdbc:postgresql://127.0.0.1:5432/x",
        "user": "u",
        "password_property": "writer.jdbc.password",
        "target_table": "t",
        "staging_tables": ["s"],
        "rows": 1,
        "execution_id": 1,
        "job_name": "job",
    }
    store.put_all(STORE, "t", [step])
    assert "s3cret" not in str(list(CommitStepRecord.objects.values_list("step", flat=True)))
    sequence = store.get_commit_sequence(STORE, "t", {"writer.jdbc.password": "s3cret"})
    assert sequence.steps[0].password == "s3cret"


# --- idempotence --------------------------------------------------------------------------


@pytest.mark.django_db
def test_running_a_commit_sequence_twice_changes_nothing_the_second_time(tmp_path):
    store = CommitStepStore()
    steps, srcs, dsts = _renames(tmp_path, 3)
    dicts = [*steps, _watermark("30")]
    token = store.put_all(STORE, "ds", dicts)
    first = CommitSequence(STORE, "ds", [CommitStep.from_dict(d) for d in dicts], store, token=token)
    assert first.run() == 4
    snapshot = {p: p.read_bytes() for p in dsts}
    history = DatasetState.objects.get(dataset_urn="ds").history.count()

    again = CommitSequence(STORE, "ds", [CommitStep.from_dict(d) for d in dicts], store)
    assert again.run() == 0  # every step verifies as done
    assert {p: p.read_bytes() for p in dsts} == snapshot
    assert sorted(p.name for p in (tmp_path / "job-output" / "ds").iterdir()) == [d.name for d in dsts]
    assert DatasetState.objects.get(dataset_urn="ds").history.count() == history
    assert not any(s.exists() for s in srcs)


@pytest.mark.django_db
def test_a_target_with_the_same_content_verifies_as_done(tmp_path):
    src = _file(tmp_path / "out" / "a.json", "same\n")
    dst = _file(tmp_path / "final" / "a.json", "same\n")
    store = CommitStepStore()
    step = FsRenameCommitStep(str(src), str(dst), 5)
    assert step.verify() is True
    token = store.put_all(STORE, "ds", [step])
    assert CommitSequence(STORE, "ds", [step], store, token=token).run() == 0
    assert dst.read_text() == "same\n"


@pytest.mark.django_db
def test_a_target_with_different_content_fails_loudly_and_is_never_overwritten(tmp_path):
    src = _file(tmp_path / "out" / "a.json", "new rows\n")
    dst = _file(tmp_path / "final" / "a.json", "somebody else's rows\n")
    store = CommitStepStore()
    dicts = [FsRenameCommitStep(str(src), str(dst), src.stat().st_size).to_dict(), _watermark("9")]
    token = store.put_all(STORE, "ds", dicts)
    sequence = CommitSequence(STORE, "ds", [CommitStep.from_dict(d) for d in dicts], store, token=token)
    with pytest.raises(CommitConflictError, match="exists with different content"):
        sequence.run()
    assert dst.read_text() == "somebody else's rows\n"
    assert src.read_text() == "new rows\n"
    assert store.exists(STORE, "ds")  # the steps stay for the next run
    assert not DatasetState.objects.filter(dataset_urn="ds").exists()  # the watermark did not move
    assert sequence.commit() is False
    assert "different content" in sequence.error


# --- failpoints --------------------------------------------------------------------------


def test_failpoints_do_nothing_unless_armed(monkeypatch):
    monkeypatch.delenv(commitstore.FAILPOINT_ENV, raising=False)
    failpoint("after_steps_written", "ds")
    with arm("after_step:1"):
        failpoint("after_step:2", "ds")
        with pytest.raises(FailpointCrash):
            failpoint("after_step:1", "ds")
        # After a simulated crash every later failpoint raises too, as if the process died.
        with pytest.raises(FailpointCrash):
            failpoint("after_steps_written", "other")
    failpoint("after_step:1", "ds")  # disarmed, crash state cleared


def test_failpoints_from_the_environment_and_a_file(monkeypatch, tmp_path):
    monkeypatch.setenv(commitstore.FAILPOINT_ENV, "before_steps_removed@orders")
    monkeypatch.setenv(commitstore.FAILPOINT_ACTION_ENV, "raise")
    failpoint("before_steps_removed", "customers")
    with pytest.raises(FailpointCrash):
        failpoint("before_steps_removed", "orders")
    commitstore.reset_failpoints()
    monkeypatch.delenv(commitstore.FAILPOINT_ENV)
    armed = tmp_path / "failpoint"
    monkeypatch.setenv(commitstore.FAILPOINT_FILE_ENV, str(armed))
    failpoint("after_task_output")  # no file yet
    armed.write_text("after_task_output\n")
    with pytest.raises(FailpointCrash):
        failpoint("after_task_output")


@pytest.mark.django_db
def test_a_crash_between_steps_leaves_the_steps_and_a_rerun_finishes_them(tmp_path):
    store = CommitStepStore()
    steps, _, dsts = _renames(tmp_path, 3)
    dicts = [*steps, _watermark("3")]
    token = store.put_all(STORE, "ds", dicts)
    with arm("after_step:2"), pytest.raises(FailpointCrash):
        CommitSequence(STORE, "ds", [CommitStep.from_dict(d) for d in dicts], store, token=token).run()
    assert [d.exists() for d in dsts] == [True, True, False]
    assert store.exists(STORE, "ds")
    again = store.get_commit_sequence(STORE, "ds", phase="recovery.")
    assert again.run() == 2  # the third rename and the watermark
    assert all(d.exists() for d in dsts) and not store.exists(STORE, "ds")
    assert DatasetState.objects.get(dataset_urn="ds").watermark == "3"


# --- parallel work ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_parallel_map_keeps_order_and_closes_each_threads_connection():
    seen: list[object] = []
    lock = threading.Lock()

    def work(n: int) -> int:
        DatasetState.objects.exists()  # opens this thread's connection
        with lock:
            seen.append(connection.connection)
        return n * n

    assert parallel_map(work, range(20), 4) == [n * n for n in range(20)]
    assert 1 <= len({id(c) for c in seen}) <= 4
    assert all(closed(c) for c in seen)  # each thread's connection closed when it ended


def closed(raw) -> bool:
    """psycopg's connection says so; a closed sqlite3 connection refuses any use."""
    if hasattr(raw, "closed"):
        return bool(raw.closed)
    try:
        raw.total_changes  # noqa: B018 - a read that a closed connection refuses
    except sqlite3.ProgrammingError:
        return True
    return False


def test_parallel_map_re_raises_a_crash_and_stops_taking_work():
    done: list[int] = []

    def work(n: int) -> int:
        if n == 3:
            raise FailpointCrash("boom")
        done.append(n)
        return n

    with pytest.raises(FailpointCrash):
        parallel_map(work, range(200), 2)
    assert len(done) < 199
