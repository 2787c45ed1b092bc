"""The history figures of /metrics are kept in slices: a pass recounts the
newest slices and a bounded number of older ones, so its cost does not grow
with the history, and every change still shows once the turn reaches it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from portal.monitoring import history_counts
from portal.orchestration.models import FlowExecution
from tests.builders.executions import make_execution

pytestmark = pytest.mark.django_db


@pytest.fixture
def counted(monkeypatch) -> list[tuple[int, int]]:
    """Slices of two rows, one hot slice, no time budget (one older slice per
    pass); returns the execution slices each pass counted."""
    monkeypatch.setattr(history_counts, "SLICE_ROWS", 2)
    monkeypatch.setattr(history_counts, "HOT_SLICES", 1)
    monkeypatch.setattr(history_counts, "PASS_BUDGET_SECONDS", 0)
    calls: list[tuple[int, int]] = []
    count = history_counts._execution_counts

    def recording(lo: int, hi: int) -> dict:
        calls.append((lo, hi))
        return count(lo, hi)

    table = history_counts.TABLES["executions"]
    monkeypatch.setitem(history_counts.TABLES, "executions", replace(table, count=recording))
    return calls


def _passes_until(expected: dict[str, int], most: int) -> int:
    for done in range(1, most + 1):
        if history_counts.refresh_history_snapshot()["executions"] == expected:
            return done
    raise AssertionError(f"not {expected} after {most} passes: {history_counts.history_snapshot()}")


def test_a_pass_counts_the_hot_slice_and_one_older_one(counted, flow):
    for _ in range(12):
        make_execution(flow, status="COMMITTED")
    history_counts.refresh_history_snapshot()
    assert len(counted) == 2  # the newest slice and one never counted before
    partial = history_counts.history_snapshot()["executions"]["COMMITTED"]
    assert partial < 12

    # The figures fill in over the next passes, two slices at a time.
    assert _passes_until({"COMMITTED": 12}, most=7) > 1
    counted.clear()
    history_counts.refresh_history_snapshot()
    assert len(counted) == 2


def test_an_old_run_that_ends_shows_on_the_next_pass(counted, flow):
    runs = [make_execution(flow, status="RUNNING") for _ in range(8)]
    _passes_until({"RUNNING": 8}, most=6)

    # Its slice's unfinished rows moved: recounted at once, not when the turn comes.
    FlowExecution.objects.filter(pk=runs[0].pk).update(status="COMMITTED")
    counted.clear()
    assert history_counts.refresh_history_snapshot()["executions"] == {"RUNNING": 7, "COMMITTED": 1}
    assert any(lo <= runs[0].pk < hi for lo, hi in counted)
    assert len(counted) <= 3  # the hot slice, the moved one, one in turn


def test_other_changes_to_old_rows_show_when_their_slice_comes_round(counted, flow):
    runs = [make_execution(flow, status="COMMITTED") for _ in range(8)]
    _passes_until({"COMMITTED": 8}, most=6)

    FlowExecution.objects.filter(pk=runs[0].pk).update(status="FAILED")
    _passes_until({"COMMITTED": 7, "FAILED": 1}, most=6)

    # Retention deletes the oldest rows: their slices drop out.
    FlowExecution.objects.filter(pk__in=[run.pk for run in runs[:4]]).delete()
    _passes_until({"COMMITTED": 4}, most=6)


def test_the_newest_rows_show_on_the_next_pass(counted, flow):
    for _ in range(8):
        make_execution(flow, status="COMMITTED")
    _passes_until({"COMMITTED": 8}, most=6)
    make_execution(flow, status="FAILED")
    assert history_counts.refresh_history_snapshot()["executions"] == {"COMMITTED": 8, "FAILED": 1}
