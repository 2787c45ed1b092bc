"""A job sent to a queue that no live worker consumes does not wait in
silence: its execution page says so at once with the
command that starts a worker, and so does the executor's health."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from portal.orchestration.control.liveness import sweep_silent_executors, unconsumed, worker_command
from portal.orchestration.models import WorkerHeartbeat
from portal.topology.models import SpecExecutor
from portal.topology.services import current_revision
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory

pytestmark = pytest.mark.django_db

COMMAND = "celery -A portal.celery worker --pool threads --loglevel INFO -Q executor.x1"


def heartbeat(worker: str, queues: list[str], *, consuming: bool = True, age: int = 0) -> None:
    seen = timezone.now() - timedelta(seconds=age)
    WorkerHeartbeat.objects.create(
        worker=worker, queues=queues, consuming=consuming, concurrency=2, started=seen, last_seen=seen
    )


@pytest.fixture
def waiting(owner):
    """An execution whose job was sent to executor.x1 and not claimed yet."""
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    execution = FlowExecutionFactory(flow=flow, status="RUNNING")
    JobExecutionFactory(execution=execution, job_name="sales.orders.1-a-to-b", status="ORCHESTRATED")
    return execution


def page_of(user, execution, **headers) -> str:
    client = Client()
    client.force_login(user)
    url = reverse(
        "orchestration:execution", args=[execution.flow_group, execution.flow_name, execution.execution_id]
    )
    return client.get(url, **headers).content.decode()


def test_only_a_live_consuming_worker_serves_a_queue(settings):
    heartbeat("host-a:1", ["q.served"])
    heartbeat("host-b:2", ["q.lost-broker"], consuming=False)
    heartbeat("host-c:3", ["q.silent"], age=10 * settings.WORKER_HEARTBEAT_SECONDS)
    assert unconsumed(["q.served", "q.lost-broker", "q.silent", "q.none"]) == {
        "q.lost-broker": worker_command("q.lost-broker"),
        "q.none": worker_command("q.none"),
        "q.silent": worker_command("q.silent"),
    }
    assert unconsumed([]) == {}


def test_the_execution_page_says_at_once_that_no_worker_consumes_the_queue(owner, waiting):
    page = page_of(owner, waiting)
    notice = page.split('data-test="no-worker"')[1].split("</div>")[0]
    assert "No worker consumes queue <code>executor.x1</code>" in notice
    assert "sales.orders.1-a-to-b waits until one does" in notice
    assert f'<pre class="command">{COMMAND}</pre>' in notice
    # The polled fragment says it too, and stops saying it once a worker consumes the queue.
    assert 'data-test="no-worker"' in page_of(owner, waiting, HTTP_HX_REQUEST="true")
    heartbeat("host-a:1", ["executor.x1"])
    assert 'data-test="no-worker"' not in page_of(owner, waiting, HTTP_HX_REQUEST="true")


def test_a_running_job_needs_no_such_word(owner, waiting):
    waiting.jobs.update(status="RUNNING")
    assert 'data-test="no-worker"' not in page_of(owner, waiting)


def test_an_executor_no_worker_ever_consumed_says_so_and_how_to_start_one(settings):
    SpecExecutor.objects.create(name="x1", uri="flowport://executors/x1", queue="executor.x1")
    revision = current_revision()
    assert sweep_silent_executors() == 1
    executor = SpecExecutor.objects.get(name="x1")
    assert executor.health_status == SpecExecutor.Health.UNKNOWN  # a new executor is no topology change
    assert executor.health_message == (
        f"No worker has consumed executor.x1 yet: jobs sent here wait. Start one: {COMMAND}"
    )
    assert current_revision() == revision
    assert sweep_silent_executors() == 0  # said once


def test_an_executor_whose_workers_went_silent_is_degraded_with_the_command(settings):
    SpecExecutor.objects.create(
        name="x1",
        uri="flowport://executors/x1",
        queue="executor.x1",
        health_status=SpecExecutor.Health.HEALTHY,
        last_heartbeat=timezone.now() - timedelta(seconds=10 * settings.WORKER_HEARTBEAT_SECONDS),
    )
    assert sweep_silent_executors() == 1
    executor = SpecExecutor.objects.get(name="x1")
    assert executor.health_status == SpecExecutor.Health.DEGRADED
    assert executor.health_message.endswith(f"Start a worker for executor.x1: {COMMAND}")
    assert sweep_silent_executors() == 0


def test_a_scheduler_just_started_gives_its_workers_a_lease_to_beat_before_calling_them_silent(settings):
    """make run starts the scheduler and the worker together: the last run's heartbeats are old, and
    calling every executor silent at the first pass (then recovered a few seconds later) said
    nothing true (independent new-user run, issue #47)."""
    from portal.orchestration.control.loop import OrchestratorLoop

    SpecExecutor.objects.create(
        name="x1",
        uri="flowport://executors/x1",
        queue="executor.x1",
        health_status=SpecExecutor.Health.HEALTHY,
        last_heartbeat=timezone.now() - timedelta(hours=5),  # the last run's
    )
    loop = OrchestratorLoop()
    loop.tick()
    assert SpecExecutor.objects.get(name="x1").health_status == SpecExecutor.Health.HEALTHY

    loop._started -= settings.WORKER_LEASE_SECONDS  # a lease later, still no worker
    loop._next_sweep = 0.0
    loop.tick()
    assert SpecExecutor.objects.get(name="x1").health_status == SpecExecutor.Health.DEGRADED
