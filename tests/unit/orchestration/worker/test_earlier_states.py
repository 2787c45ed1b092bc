"""A retry that only finished its execution's commit (the data was pulled by an earlier attempt)
still says what the execution delivered and where: it keeps the earlier attempt's task states of
the datasets it saw finished and did not pull again."""

from __future__ import annotations

import pytest

from portal.orchestration.worker.executor import JobRun
from tests.unit.orchestration.factories import JobExecutionFactory

pytestmark = pytest.mark.django_db


def state(urn: str, status: str = "SUCCEEDED", records: int = 51) -> dict[str, object]:
    return {"dataset_urn": urn, "status": status, "records_written": records}


def retry_of(earlier: list[dict[str, object]]) -> JobRun:
    job = JobExecutionFactory(attempt=2, task_states=earlier)
    return JobRun(job, 2, "worker", None, None, None, None)  # type: ignore[arg-type]


def test_the_datasets_finished_without_a_pull_keep_their_earlier_states():
    run = retry_of([state("orders"), state("customers")])
    kept = run.earlier_states([state("customers", records=3)], finished={"orders", "customers"})
    assert kept == [state("orders")]  # customers was pulled again: this attempt's state stands


def test_a_failed_earlier_state_or_an_unfinished_dataset_is_not_kept():
    run = retry_of([state("orders", status="FAILED"), state("refunds")])
    assert run.earlier_states([], finished={"orders"}) == []
