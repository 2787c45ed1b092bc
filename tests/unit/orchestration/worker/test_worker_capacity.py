"""Executor health tells the truth about its workers: HEALTHY
only while a worker consumes the queue with a free job thread, BUSY while
all its threads run jobs; a worker
without a broker, with busy, gone or wedged threads says so in its row and
in the executor's health message at its next beat."""

from __future__ import annotations

import threading

import pytest
from django.utils import timezone

from portal.orchestration.models import JobStatus, WorkerHeartbeat
from portal.orchestration.worker import capacity
from portal.orchestration.worker.capacity import Capacity
from portal.orchestration.worker.lifesigns import beat
from portal.topology.models import SpecExecutor
from portal.topology.services import current_revision
from tests.builders.executions import make_execution

pytestmark = pytest.mark.django_db

QUEUE = "executor.local"


@pytest.fixture
def executor(db):
    return SpecExecutor.objects.create(
        name="local",
        uri="flowport://executors/local",
        queue=QUEUE,
        spark_master="local[*]",
        technology="spark-local",
    )


def idle(n: int = 2) -> Capacity:
    return Capacity(consuming=True, concurrency=n, busy=0, gone=0, wedged=[])


def health(executor) -> tuple[str, str]:
    executor.refresh_from_db()
    return executor.health_status, executor.health_message


def test_a_consuming_worker_with_a_free_thread_makes_its_executor_healthy(executor):
    beat("host-a:1", [QUEUE], timezone.now(), idle())
    status, message = health(executor)
    assert status == SpecExecutor.Health.HEALTHY
    assert message == f"1 worker(s) consuming {QUEUE} with 2 free job thread(s)."
    row = WorkerHeartbeat.objects.get(worker="host-a:1")
    assert (row.consuming, row.concurrency, row.free_slots, row.stuck_slots, row.problems) == (
        True,
        2,
        2,
        0,
        "",
    )


def test_all_threads_busy_is_its_own_state_that_changes_no_route(executor):
    """Busy is no fault but no free capacity either: BUSY, the message says
    the jobs wait; it routes as HEALTHY, so the flip is no topology change."""
    beat("host-a:1", [QUEUE], timezone.now(), idle())
    revision = current_revision()
    beat("host-a:1", [QUEUE], timezone.now(), Capacity(True, 2, busy=2, gone=0, wedged=[]))
    assert health(executor) == (
        SpecExecutor.Health.BUSY,
        f"All 2 usable job thread(s) consuming {QUEUE} are running jobs; new jobs wait.",
    )
    assert executor.usable
    assert current_revision() == revision
    # Half the threads gone, the other busy: still running jobs, said so.
    beat("host-a:1", [QUEUE], timezone.now(), Capacity(True, 2, busy=1, gone=1, wedged=[]))
    status, message = health(executor)
    assert status == SpecExecutor.Health.BUSY
    assert message.startswith(f"All 1 usable job thread(s) consuming {QUEUE} are running jobs")
    assert "Troubled workers: host-a:1: 1 of 2 job thread(s) gone" in message
    # A thread frees up: HEALTHY again, still no topology change.
    beat("host-a:1", [QUEUE], timezone.now(), idle())
    assert health(executor)[0] == SpecExecutor.Health.HEALTHY
    assert current_revision() == revision


def test_a_worker_without_its_broker_is_not_consuming(executor):
    lost = Capacity(
        False, 2, busy=1, gone=0, wedged=[], not_consuming_reason="no broker connection (reconnecting)"
    )
    beat("host-a:1", [QUEUE], timezone.now(), lost)
    status, message = health(executor)
    assert status == SpecExecutor.Health.DEGRADED
    assert (
        message
        == f"No worker is consuming {QUEUE}: host-a:1: not consuming: no broker connection (reconnecting)."
    )
    assert WorkerHeartbeat.objects.get(worker="host-a:1").consuming is False


def test_a_worker_whose_threads_are_gone_or_wedged_makes_its_executor_unhealthy(executor):
    stuck = Capacity(
        True, 2, busy=1, gone=1, wedged=["job 7 attempt 1 on t-1: its job is failed already 90 s ago"]
    )
    beat("host-a:1", [QUEUE], timezone.now(), stuck)
    status, message = health(executor)
    assert status == SpecExecutor.Health.UNHEALTHY
    assert "1 of 2 job thread(s) gone" in message and "job thread wedged: job 7 attempt 1" in message
    row = WorkerHeartbeat.objects.get(worker="host-a:1")
    assert (row.free_slots, row.stuck_slots) == (0, 2)
    # Another worker on the queue with a free thread: healthy, the trouble still named.
    beat("host-b:2", [QUEUE], timezone.now(), idle(1))
    status, message = health(executor)
    assert status == SpecExecutor.Health.HEALTHY
    assert message.startswith(
        f"1 worker(s) consuming {QUEUE} with 1 free job thread(s). Troubled workers: host-a:1:"
    )


def test_a_thread_still_inside_a_finished_job_is_wedged_after_the_grace(settings):
    """Real slot bookkeeping against a real job row: the thread is inside the
    delivery while the job is reported FAILED elsewhere (a lease lapse moved it on)."""
    execution = make_execution(status="RUNNING", jobs=[{"status": JobStatus.RUNNING, "attempt": 1}])
    job = execution.jobs.get()
    inside, leave = threading.Event(), threading.Event()

    def run():
        with capacity.occupied(job.pk, 1):
            inside.set()
            leave.wait(30)

    thread = threading.Thread(target=run, name="job-thread-1")
    thread.start()
    try:
        inside.wait(10)
        settings.WORKER_WEDGED_SECONDS = 0
        state = capacity.assess("host-a:1")
        assert (state.busy, state.wedged) == (1, [])  # its job still runs: busy, not wedged
        job.status = JobStatus.FAILED
        job.save(update_fields=["status"])
        state = capacity.assess("host-a:1")
        assert state.busy == 1 and len(state.wedged) == 1
        assert state.wedged[0].startswith(
            f"job {job.pk} attempt 1 on job-thread-1: its job is failed already"
        )
        settings.WORKER_WEDGED_SECONDS = 3600
        assert capacity.assess("host-a:1").wedged == []  # within the grace: not yet
    finally:
        leave.set()
        thread.join(10)
    assert capacity.assess("host-a:1").busy == 0


def test_a_worker_still_connecting_at_start_up_leaves_its_executors_alone(executor):
    connecting = Capacity(
        False, 2, 0, 0, [], not_consuming_reason="no broker connection (reconnecting)", starting=True
    )
    beat("host-a:1", [QUEUE], timezone.now(), connecting)
    assert health(executor) == (SpecExecutor.Health.UNKNOWN, "")
    row = WorkerHeartbeat.objects.get(worker="host-a:1")
    assert (row.consuming, row.problems) == (False, "not consuming: no broker connection (reconnecting)")
