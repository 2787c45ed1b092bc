"""The crash matrix: a real worker process SIGKILLed at each named point, for each destination kind,
each write mode and each source kind (issue #45).

Each story is a flow from a source — a folder one new CSV lands in per run, or a PostgreSQL table
read incrementally on ``updated_at`` — into one destination kind with one write mode: run 1
commits; runs 2 and 3 each start an attempt in a worker process of its own (``execute_job`` as a
Celery worker runs it: claim, Spark, recovery, pull, commit) that SIGKILLs itself at the
scenario's point; run 2's execution is redelivered (a new attempt of the same execution), run 3's
is given up and the flow's next execution recovers. A point list ``a,recovery.b`` kills the
redelivered attempt again while it redoes the first one's steps. The recovering attempts run in
this process (warm Spark). After each recovery: the destination holds exactly what the mode
promises (0 lost, 0 duplicated, 0 stale), the watermark is the last run's, no commit step is
left, and the recovering execution is COMMITTED.

Pairwise, not the full product (CI's time): every point meets a JDBC destination, every destination
kind and every write mode meets at least two points, merge into the JDBC destinations (where issue
#45 lived) meets the most, from both a files and a JDBC source; the in-process crash stories
(test_exactly_once_modes.py, test_exactly_once.py) cover the rest of the product with failpoints.
The cdc sources are issue #45's own story (test_cdc_merge_crash.py) and the cdc crash stories."""

from __future__ import annotations

import time
from typing import Any

import pytest

from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import CommitStoreDataset, DatasetState, FlowExecution
from tests.factories import UserFactory
from tests.integration.crash_harness import (
    CRASH_BROKER_URL,
    RUNS,
    Story,
    expected,
    format_table,
    killed_attempt,
)
from tests.integration.stack import process_env

pytestmark = pytest.mark.django_db(transaction=True)

# (source kind, destination kind, write mode, the points of run 2, the points of run 3); a point
# list kills one attempt per point, in order. `make test` runs three rows (a JDBC source merged
# into PostgreSQL, MariaDB and Iceberg; killed while pulling, after the steps are stored and
# between two steps); the rows marked soak (staging, the redo itself, before the steps are removed)
# run under `make soak`, to keep CI inside its time. The PostgreSQL merge from CDC is killed for
# real by tests/integration/test_cdc_merge_crash.py, and files into files by
# tests/integration/test_exactly_once.py.
SOAK = pytest.mark.soak
MATRIX = [
    ("jdbc", "postgresql", "merge", ["after_steps_written"], ["after_step:1"]),
    pytest.param(
        "files",
        "postgresql",
        "merge",
        ["after_steps_written", "recovery.after_step:1"],
        ["while_pulling"],
        marks=SOAK,
    ),
    pytest.param("files", "mariadb", "merge", ["after_step:1"], ["before_steps_removed"], marks=SOAK),
    ("files", "mariadb", "overwrite", ["while_pulling"], ["after_steps_written"]),
    pytest.param("files", "parquet", "append", ["after_task_output"], ["after_step:1"], marks=SOAK),
    pytest.param("jdbc", "parquet", "overwrite", ["while_pulling"], ["before_steps_removed"], marks=SOAK),
    ("files", "iceberg", "history", ["after_steps_written"], ["after_step:1"]),
]


@pytest.fixture(scope="module")
def attempt_env(django_db_setup, django_db_blocker, tmp_path_factory) -> dict[str, str]:
    with django_db_blocker.unblock():
        return process_env(tmp_path_factory.mktemp("matrix-var"), CRASH_BROKER_URL)


def kill_and_recover(story: Story, points: list[str], env: dict[str, str], logs: Any, fresh: bool) -> str:
    """Start the run, kill an attempt at each point, then recover in this process: the next
    attempt of the execution, or (`fresh`) the flow's next execution. What happened, in words."""
    job = story.start()
    for point in points:
        code = killed_attempt(job, env, point, logs)
        if code != -9:
            return f"NOT KILLED at {point} (exit {code})"
        job = story.redeliver(job)
    if fresh:
        story.give_up(job)
        job = story.start()
    outcome = story.run(job)
    process_actions()  # the orchestrator concludes the execution
    job.refresh_from_db()
    execution = FlowExecution.objects.get(pk=job.execution_id)
    return f"{outcome} (attempt {job.attempt}, execution {execution.status})"


@pytest.mark.timeout(1200)
@pytest.mark.parametrize(
    ("source", "target", "mode", "second", "third"),
    MATRIX,
    ids=[f"{s}-{t}-{m}" for s, t, m, *_ in (getattr(row, "values", row) for row in MATRIX)],
)
def test_a_worker_killed_at_each_point_leaves_each_destination_and_mode_exact(
    source, target, mode, second, third, tmp_path, settings, attempt_env, capsys
):
    settings.FLOWPORT_WORK_DIR = str(tmp_path / "work")
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
    story = Story(tmp_path, target, mode, UserFactory(username="mona"), source)
    rows: list[dict[str, Any]] = []
    try:
        story.land(RUNS[0])
        assert story.run(story.start()) == "committed"
        for run, points, fresh in ((2, second, False), (3, third, True)):
            began = time.monotonic()
            story.land(RUNS[run - 1])
            outcome = kill_and_recover(story, points, attempt_env, tmp_path / "attempts", fresh)
            got, want = story.dest.rows(), expected(mode, run)
            state = DatasetState.objects.get(flow_name=f"{target}-{mode}")
            rows.append(
                {
                    "point": f"{source} → {target} {mode} run {run}: {' then '.join(points)}",
                    "crashed": "SIGKILL" if not outcome.startswith("NOT") else "no",
                    "recovered": outcome,
                    "duplicates": len(got) - len(set(got)),
                    "lost": f"{len(set(want) - set(got))} lost / {len(set(got) - set(want))} stale or extra",
                    "watermark": "yes"
                    if story.source.watermark_of(run, state.watermark)
                    else f"NO {state.watermark}",
                    "staging left": len(story.dest.staging_left()),
                    "seconds": f"{time.monotonic() - began:.0f}",
                }
            )
            assert not CommitStoreDataset.objects.exists(), format_table(rows)
            assert story.dest.staging_left() == [], format_table(rows)
    finally:
        story.drop()
        table = format_table(rows)
        with capsys.disabled():
            print(f"\n\nSIGKILL matrix ({target}, {mode}):\n{table}\n")
    for row in rows:
        assert row["crashed"] == "SIGKILL", table
        assert row["recovered"].startswith("committed") and row["recovered"].endswith("COMMITTED)"), table
        assert (row["duplicates"], row["lost"], row["watermark"]) == (
            0,
            "0 lost / 0 stale or extra",
            "yes",
        ), table
