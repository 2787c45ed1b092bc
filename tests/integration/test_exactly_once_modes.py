"""Exactly-once under crashes for each replacing write mode, at each destination.

A flow reads customers from CSV files (files source, one new file per run) and writes them with
``writer.write.mode`` = overwrite, merge or history into Parquet files, PostgreSQL, MariaDB or an
Iceberg table. The worker's own ``execute_job`` runs in this process (real Spark, the real commit
path, the real orchestrator binding the job) and a failpoint stops it as a crash would:

* run 1 loads ids 1-4 and commits;
* run 2 changes ids 3-4 and adds 5-6; the worker dies *between the publish steps* (the data step
  done, the watermark's check-in not) and the orchestrator's redelivered attempt recovers;
* run 3 changes id 6 and adds 7; the worker dies after writing its commit steps, before running
  any; the execution is given up and the flow's next execution finishes them before it reads.

After each run the destination must hold exactly what the mode promises: overwrite the last run's
rows, merge one row per key (the latest), history one current version per key with every earlier
version closed. 0 duplicated, 0 lost, no version added twice. The SIGKILL tests with real
processes (test_exactly_once.py) cover the same commit path for appends; here the steps are the
modes' own (``fs_replace``, ``jdbc_publish`` with overwrite/merge/history, the Iceberg commit).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from portal.orchestration.models import (
    CommitStoreDataset,
    DatasetState,
)
from tests.factories import UserFactory
from tests.integration.crash_harness import (  # noqa: F401 (fixture)
    MODES,
    RUNS,
    TARGETS,
    Story,
    expected,
    failpoints,
    format_table,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("target", TARGETS)
def test_a_crash_between_publish_steps_leaves_each_mode_exact(target, tmp_path, settings, request, capsys):
    request.getfixturevalue("failpoints")
    settings.FLOWPORT_WORK_DIR = str(tmp_path / "work")
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
    table: list[dict[str, Any]] = []
    problems: list[str] = []
    owner = UserFactory(username="mona")
    for mode in MODES:
        began = time.monotonic()
        story = Story(tmp_path / mode, target, mode, owner)
        try:
            outcomes = []
            story.land(RUNS[0])
            outcomes.append(story.run(story.start()))
            story.land(RUNS[1])
            job = story.start()
            outcomes.append(story.run(job, "after_step:1"))
            outcomes.append(story.run(story.redeliver(job)))
            after_two = story.dest.rows()
            story.land(RUNS[2])
            job = story.start()
            outcomes.append(story.run(job, "after_steps_written"))
            story.give_up(job)
            outcomes.append(story.run(story.start()))
            after_three = story.dest.rows()
            state = DatasetState.objects.get(flow_name=f"{target}-{mode}", dataset_urn="customers")
        finally:
            story.drop()
        want = ["committed", "crashed", "committed", "crashed", "committed"]
        row = {
            "point": f"{target} {mode}",
            "crashed": "after_step:1, after_steps_written",
            "recovered": "yes" if outcomes == want else f"NO {outcomes}",
            "duplicates": len(after_three) - len(set(after_three)),
            "lost": len(set(expected(mode, 3)) - set(after_three)),
            "watermark": "yes" if state.watermark.endswith("batch-3.csv") else f"NO {state.watermark}",
            "seconds": f"{time.monotonic() - began:.0f}",
        }
        table.append(row)
        if after_two != expected(mode, 2):
            problems.append(f"{target} {mode} after run 2: {after_two} != {expected(mode, 2)}")
        if after_three != expected(mode, 3):
            problems.append(f"{target} {mode} after run 3: {after_three} != {expected(mode, 3)}")
        if CommitStoreDataset.objects.filter(dataset_urn="customers").exists():
            problems.append(f"{target} {mode}: commit steps left pending")
            CommitStoreDataset.objects.all().delete()
    shown = format_table(table)
    with capsys.disabled():
        print(f"\n\nWrite modes under crashes ({target}):\n{shown}\n")
    assert not problems, "\n".join(problems) + "\n" + shown
    for row in table:
        assert (row["recovered"], row["duplicates"], row["lost"], row["watermark"]) == ("yes", 0, 0, "yes"), (
            shown
        )
