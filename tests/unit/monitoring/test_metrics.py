"""/metrics: Prometheus families computed from the database at scrape time."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from portal.events.services import raise_event
from portal.monitoring.models import HealthCheck
from portal.orchestration.models import Action, OutboxMessage, WorkerHeartbeat
from portal.topology.models import SpecExecutor
from tests.builders.executions import make_execution

pytestmark = pytest.mark.django_db
URL = reverse("monitoring:metrics")


@pytest.fixture
def scraper(settings) -> Client:
    """Prometheus, with the bearer token the operator gave it (anonymous visitors get 401:
    tests/security/test_attacker_surfaces.py)."""
    settings.MONITORING_METRICS_TOKEN = "scrape-me"
    return Client(headers={"Authorization": "Bearer scrape-me"})


def _samples(response) -> dict:
    text = response.content.decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _job(started, seconds, status="COMMITTED", records=0, executor="local"):
    return {
        "status": status,
        "started_at": started,
        "ended_at": started + timedelta(seconds=seconds),
        "processed_count": records,
        "executor": executor,
    }


def test_metrics_expose_every_family_with_the_right_values(scraper, flow, executor):
    now = timezone.now()
    t0 = now - timedelta(hours=1)
    make_execution(
        flow,
        status="COMMITTED",
        jobs=[_job(t0, 10, records=100), _job(t0, 100, records=50)],
    )
    make_execution(flow, status="FAILED", jobs=[_job(t0, 4000, status="FAILED", executor="edge")])
    make_execution(flow, status="RUNNING", jobs=[{"status": "RUNNING", "started_at": now}])
    pending = make_execution(flow, status="PENDING", created=now - timedelta(minutes=10))
    assert pending
    OutboxMessage.objects.create(queue="q", task_name="t", kwargs={})
    OutboxMessage.objects.create(queue="q", task_name="t", kwargs={}, sent_at=now)
    Action.objects.create(
        flow_group="g", flow_name="n", execution_id=1, kind="REEVALUATE", due_at=now - timedelta(seconds=120)
    )
    Action.objects.create(
        flow_group="g", flow_name="n", execution_id=2, kind="REEVALUATE", due_at=now + timedelta(hours=1)
    )
    WorkerHeartbeat.objects.create(worker="a", executors=[], queues=[], started=now, last_seen=now)
    WorkerHeartbeat.objects.create(
        worker="b", executors=[], queues=[], started=now, last_seen=now - timedelta(hours=1)
    )
    SpecExecutor.objects.filter(pk=executor.pk).update(health_status="DEGRADED")
    HealthCheck.objects.create(
        key="broker", kind="broker", target="redis://q", status="DOWN", checked_at=now, changed_at=now
    )
    raise_event("sla.job_start_missed", "late")

    response = scraper.get(URL)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    s = _samples(response)

    assert s[("flowport_flow_executions", (("status", "COMMITTED"),))] == 1
    assert s[("flowport_flow_executions", (("status", "FAILED"),))] == 1
    assert s[("flowport_flow_executions", (("status", "RUNNING"),))] == 1
    assert s[("flowport_flow_executions", (("status", "PENDING"),))] == 1
    assert s[("flowport_flow_executions", (("status", "SKIPPED"),))] == 0
    assert s[("flowport_jobs", (("status", "RUNNING"),))] == 1

    local = (("executor", "local"), ("status", "COMMITTED"))
    assert s[("flowport_job_duration_seconds_count", local)] == 2
    assert s[("flowport_job_duration_seconds_sum", local)] == pytest.approx(110)
    assert s[("flowport_job_duration_seconds_bucket", (*local[:1], ("le", "5.0"), local[1]))] == 0
    assert s[("flowport_job_duration_seconds_bucket", (*local[:1], ("le", "15.0"), local[1]))] == 1
    assert s[("flowport_job_duration_seconds_bucket", (*local[:1], ("le", "120.0"), local[1]))] == 2
    assert s[("flowport_job_duration_seconds_bucket", (*local[:1], ("le", "+Inf"), local[1]))] == 2
    edge = (("executor", "edge"), ("le", "3600.0"), ("status", "FAILED"))
    assert s[("flowport_job_duration_seconds_bucket", edge)] == 0
    assert s[("flowport_job_duration_seconds_count", (("executor", "edge"), ("status", "FAILED")))] == 1

    assert s[("flowport_records_processed_total", (("executor", "local"),))] == 150
    assert s[("flowport_scheduler_action_lag_seconds", ())] == pytest.approx(120, abs=5)
    assert s[("flowport_actions_due", ())] == 1
    assert s[("flowport_oldest_pending_execution_age_seconds", ())] == pytest.approx(600, abs=5)
    assert s[("flowport_outbox_backlog", ())] == 1
    assert s[("flowport_outbox_oldest_unsent_age_seconds", ())] < 60
    assert s[("flowport_workers_alive", ())] == 1
    assert s[("flowport_executors", (("health", "DEGRADED"),))] == 1
    assert s[("flowport_health_check_up", (("kind", "broker"), ("target", "redis://q")))] == 0
    assert s[("flowport_events_total", (("kind", "sla.job_start_missed"),))] == 1


def test_an_empty_portal_answers_zeros(scraper, db):
    s = _samples(scraper.get(URL))
    assert s[("flowport_outbox_backlog", ())] == 0
    assert s[("flowport_scheduler_action_lag_seconds", ())] == 0
    assert s[("flowport_workers_alive", ())] == 0


def test_a_metrics_token_is_required_when_configured(client, settings, db):
    settings.MONITORING_METRICS_TOKEN = "scrape-me"
    assert client.get(URL).status_code == 401
    assert client.get(URL, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get(URL, headers={"Authorization": "Bearer scrape-me"}).status_code == 200


def test_history_figures_come_from_the_snapshot_the_scheduler_refreshes(scraper, flow):
    from portal.monitoring.history_counts import refresh_history_snapshot

    make_execution(flow, status="COMMITTED")
    first = _samples(scraper.get(URL))
    assert first[("flowport_flow_executions", (("status", "COMMITTED"),))] == 1
    assert ("flowport_history_metrics_age_seconds", ()) in first

    make_execution(flow, status="COMMITTED")
    # A scrape does not re-read the history ...
    assert _samples(scraper.get(URL))[("flowport_flow_executions", (("status", "COMMITTED"),))] == 1
    # ... the scheduler's refresh does.
    refresh_history_snapshot()
    assert _samples(scraper.get(URL))[("flowport_flow_executions", (("status", "COMMITTED"),))] == 2
