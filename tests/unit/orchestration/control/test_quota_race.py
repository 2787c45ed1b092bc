"""Two schedulers deciding at once never both take an executor's last slot: the
count-then-dispatch decision holds the quota lock until its transaction commits.

The schedulers are two threads, each with its own PostgreSQL connection and
transaction, each launching one job (alice's, bob's) on an executor with room for
one. Between the count (the gate) and the dispatch each waits, up to a few
seconds, for the other to have counted as well. Without the lock both count 0 of 1 there and both dispatch (the control
story proves the barrier opens that window); with it the second scheduler cannot
count before the first commits, the first gives up waiting and dispatches alone,
and the second then counts 1 of 1 and keeps its job waiting."""

from __future__ import annotations

import contextlib
import threading

import pytest
from django.db import connection

from portal.orchestration.control import orchestrator
from portal.orchestration.control.actions import process_actions
from portal.orchestration.control.scheduler import create_execution
from portal.orchestration.models import FlowExecution, JobExecution, JobStatus
from portal.quotas import services as quotas
from portal.quotas.models import Quota
from portal.topology.models import SpecExecutor
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW_SECONDS = 3.0  # how long a scheduler holds its count before dispatching


def _two_schedulers_race(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    nodes("a", "b")
    executor("x1", "a>b")
    x1 = SpecExecutor.objects.get(name="x1")
    Quota.objects.create(scope=Quota.Scope.EXECUTOR, executor=x1, max_concurrent_jobs=1)
    # Two owners: a launch locks its flow and owner rows, so one owner's launches never overlap.
    for name in ("alice", "bob"):
        flow = FlowConfigFactory(
            owner=UserFactory(username=name), flow_group=name, flow_name="f", schedule="",
            source="a", destinations=["b"],
        )  # fmt: skip
        create_execution(flow, FlowExecution.Trigger.RUN_NOW, requested_by=name)
    counted = threading.Barrier(2)
    dispatch = orchestrator._dispatch

    def dispatch_after_the_other_counted(execution, job):  # between the gate's count and the dispatch
        # Broken: the other scheduler could not count meanwhile (it waits for the lock).
        with contextlib.suppress(threading.BrokenBarrierError):
            counted.wait(timeout=WINDOW_SECONDS)
        dispatch(execution, job)

    monkeypatch.setattr(orchestrator, "_dispatch", dispatch_after_the_other_counted)
    go = threading.Barrier(2)
    errors: list[BaseException] = []

    def scheduler(name: str) -> None:
        try:
            go.wait()
            process_actions(limit=1, claimer=name)  # one launch each, in its own transaction
        except BaseException as error:  # reported below, not lost in the thread
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=scheduler, args=(f"scheduler-{n}",)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert JobExecution.objects.count() == 2
    return sorted(JobExecution.objects.values_list("status", flat=True))


def test_two_schedulers_counting_at_once_dispatch_no_more_than_the_quota(monkeypatch):
    statuses = _two_schedulers_race(monkeypatch)
    assert statuses == sorted([JobStatus.ORCHESTRATED, JobStatus.PENDING])
    waiting = JobExecution.objects.get(status=JobStatus.PENDING)
    assert waiting.message == "waiting: executor x1 at 1 of 1 concurrent jobs"


@pytest.mark.postgres  # SQLite writes one transaction at a time: it needs no lock, opens no window
def test_control_without_the_lock_both_schedulers_take_the_last_slot(monkeypatch):
    """The story above would prove nothing if its window never opened: with the lock
    taken away, the same two schedulers both dispatch."""
    monkeypatch.setattr(quotas, "serialise", lambda: None)
    assert _two_schedulers_race(monkeypatch) == [JobStatus.ORCHESTRATED, JobStatus.ORCHESTRATED]
