"""The health monitor: one event per change of verdict, for executors whose
worker went silent, Spark masters and the broker, probed for real."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from portal.events.models import Event
from portal.monitoring import health
from portal.monitoring.models import HealthCheck
from portal.orchestration.control.liveness import (
    DEPARTED_AFTER,
    prune_departed_workers,
    sweep_silent_executors,
)
from portal.orchestration.models import WorkerHeartbeat
from portal.orchestration.worker.capacity import Capacity
from portal.orchestration.worker.lifesigns import beat
from portal.topology.models import SpecExecutor

pytestmark = pytest.mark.django_db

# A worker consuming its queues with both job threads free.
IDLE = Capacity(consuming=True, concurrency=2, busy=0, gone=0, wedged=[])


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock
    sock.close()


def _events(prefix: str) -> list[tuple[str, str]]:
    return list(Event.objects.filter(kind__startswith=prefix).order_by("id").values_list("kind", "severity"))


def test_a_silent_worker_degrades_its_executor_and_raises_one_event(executor, settings):
    beat("host-a:1", ["executor.local"], timezone.now(), IDLE)
    assert health.check_executors() == 1  # first sight, healthy: recorded, no event
    assert _events("executor.") == []
    # The worker stops; the scheduler's sweep degrades the executor.
    SpecExecutor.objects.filter(pk=executor.pk).update(
        last_heartbeat=timezone.now() - timedelta(seconds=10 * settings.WORKER_HEARTBEAT_SECONDS)
    )
    assert sweep_silent_executors() == 1
    assert health.check_executors() == 1
    assert health.check_executors() == 0  # every later poll: nothing new
    assert _events("executor.") == [("executor.degraded", "WARNING")]
    event = Event.objects.get(kind="executor.degraded")
    assert event.subject == "local" and "no worker heartbeat" in event.message
    # The worker comes back.
    beat("host-a:1", ["executor.local"], timezone.now(), IDLE)
    assert health.check_executors() == 1
    assert _events("executor.") == [("executor.degraded", "WARNING"), ("executor.recovered", "INFO")]


def test_a_worker_gone_for_a_week_leaves_the_dashboard(executor):
    beat("host-a:1", ["executor.local"], timezone.now(), IDLE)
    beat("host-a:2", ["executor.local"], timezone.now(), IDLE)
    WorkerHeartbeat.objects.filter(worker="host-a:1").update(
        last_seen=timezone.now() - DEPARTED_AFTER - timedelta(minutes=1)
    )
    assert prune_departed_workers() == 1
    assert list(WorkerHeartbeat.objects.values_list("worker", flat=True)) == ["host-a:2"]


def test_an_executor_marked_unhealthy_is_an_error(executor):
    health.check_executors()
    SpecExecutor.objects.filter(pk=executor.pk).update(health_status="UNHEALTHY", health_message="disk full")
    health.check_executors()
    health.check_executors()
    assert _events("executor.") == [("executor.unhealthy", "ERROR")]


def test_broker_unreachable_on_a_closed_port_then_back(settings, tmp_path):
    settings.MONITORING_PROBE_TIMEOUT_SECONDS = 1
    settings.CELERY_BROKER_URL = f"amqp://flowport:s3cret@127.0.0.1:{_closed_port()}//"
    assert health.check_infrastructure(force=True) == 1
    check = HealthCheck.objects.get(key="broker")
    assert check.status == "DOWN" and "refused" in check.message.lower()
    assert check.target.startswith("amqp://127.0.0.1:") and "flowport" not in check.target
    assert health.check_infrastructure(force=True) == 0  # still down: no new event
    assert _events("broker.") == [("broker.unreachable", "ERROR")]
    assert "s3cret" not in Event.objects.get(kind="broker.unreachable").message
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    assert health.check_infrastructure(force=True) == 1
    assert HealthCheck.objects.get(key="broker").status == "UP"
    assert _events("broker.") == [("broker.unreachable", "ERROR"), ("broker.recovered", "INFO")]


def test_a_reachable_broker_raises_nothing(settings, tmp_path):
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    health.check_infrastructure(force=True)
    assert HealthCheck.objects.get(key="broker").status == "UP"
    assert not Event.objects.exists()


def test_spark_master_probes_for_standalone_and_a_note_for_yarn(settings, tmp_path, listener):
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    port = listener.getsockname()[1]
    master = f"spark://127.0.0.1:{port}"
    for name, technology, spark_master in (
        ("cluster", "spark-standalone", master),
        ("hadoop", "yarn", "yarn"),
        ("laptop", "spark-local", "local[*]"),
    ):
        SpecExecutor.objects.create(
            name=name,
            uri=f"flowport://executors/{name}",
            queue=f"executor.{name}",
            technology=technology,
            spark_master=spark_master,
        )
    health.check_infrastructure(force=True)
    assert HealthCheck.objects.get(key=f"spark_master:{master}").status == "UP"
    yarn = HealthCheck.objects.get(key="spark_master:yarn")
    assert yarn.status == "SKIPPED" and "not probed" in yarn.message and "hadoop" in yarn.message
    assert not HealthCheck.objects.filter(target="local[*]").exists()
    assert not Event.objects.exists()
    listener.close()  # the master goes away
    assert health.check_infrastructure(force=True) == 1
    health.check_infrastructure(force=True)
    assert _events("spark_master.") == [("spark_master.unreachable", "ERROR")]
    event = Event.objects.get()
    assert master in event.message and "cluster" in event.message


def test_a_standalone_ha_master_is_up_when_one_of_its_hosts_answers(listener):
    port = listener.getsockname()[1]
    status, message = health._probe_spark_master(f"spark://127.0.0.1:{_closed_port()},127.0.0.1:{port}", 1)
    assert status == "UP" and str(port) in message
    assert health.spark_master_addresses("spark://a:1,[::1]:2,b") == [("a", 1), ("::1", 2), ("b", 7077)]


def test_only_one_scheduler_probes_a_target_per_interval(settings, tmp_path):
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    settings.MONITORING_PROBE_INTERVAL_SECONDS = 30
    now = timezone.now()
    health.check_infrastructure(now)
    checked = HealthCheck.objects.get(key="broker").checked_at
    health.check_infrastructure(now + timedelta(seconds=5))  # another process, soon after: skipped
    assert HealthCheck.objects.get(key="broker").checked_at == checked
    health.check_infrastructure(now + timedelta(seconds=31))
    assert HealthCheck.objects.get(key="broker").checked_at > checked


def test_a_busy_executor_is_up_and_raises_no_event(executor, signed_in):
    """BUSY is shown (dashboard, executor page) but is no fault: the monitor
    counts it up and raises nothing as jobs start and end."""
    beat("host-a:1", ["executor.local"], timezone.now(), IDLE)
    health.check_executors()
    beat("host-a:1", ["executor.local"], timezone.now(), Capacity(True, 2, busy=2, gone=0, wedged=[]))
    assert health.check_executors() == 1
    assert HealthCheck.objects.get(key="executor:local").status == "UP"
    dashboard = (
        signed_in.get(reverse("monitoring:dashboard"))
        .content.decode()
        .split('id="dash-health"')[1]
        .split("</section>")[0]
    )
    assert '<span class="badge busy">busy</span>' in dashboard and "new jobs wait" in dashboard
    page = signed_in.get(reverse("topology:executor", args=["local"])).content.decode()
    assert '<span class="badge busy">busy</span>' in page and "used by the compiler" in page
    beat("host-a:1", ["executor.local"], timezone.now(), IDLE)
    health.check_executors()
    assert _events("executor.") == []


def test_a_degraded_executor_that_comes_back_busy_has_recovered(executor):
    health.check_executors()
    SpecExecutor.objects.filter(pk=executor.pk).update(health_status="DEGRADED", health_message="no broker")
    health.check_executors()
    beat("host-a:1", ["executor.local"], timezone.now(), Capacity(True, 2, busy=2, gone=0, wedged=[]))
    health.check_executors()
    assert _events("executor.") == [("executor.degraded", "WARNING"), ("executor.recovered", "INFO")]
    assert "is usable (busy) again" in Event.objects.get(kind="executor.recovered").message
