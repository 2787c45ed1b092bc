"""The flow SLA monitor: expected completions of unfinished executions,
one event per execution, never for finished ones."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.events.models import Event
from portal.events.services import raise_event
from portal.monitoring import monitors
from portal.monitoring.monitors import check_failed_executions, check_flow_slas, expectation, run_monitors
from portal.orchestration.models import Action
from tests.builders.executions import finished_run, make_execution
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db
HOUR = {"gobblin.flow.sla.time": "1", "gobblin.flow.sla.timeunit": "HOURS"}


@pytest.fixture
def hourly(owner):
    return FlowConfigFactory(flow_group="sales", flow_name="hourly", owner=owner, properties=dict(HOUR))


def _ago(minutes: float):
    return timezone.now() - timedelta(minutes=minutes)


def test_an_execution_past_most_of_its_sla_is_at_risk_once(hourly):
    execution = make_execution(hourly, status="RUNNING", created=_ago(50), started=_ago(49))
    assert check_flow_slas() == 1
    event = Event.objects.get()
    assert event.kind == "sla.flow_finish_at_risk"
    assert (event.flow_group, event.flow_name, event.execution_id) == (
        "sales",
        "hourly",
        execution.execution_id,
    )
    assert "80% of its SLA has passed" in event.message
    assert check_flow_slas() == 0  # the next pass, and any other scheduler, adds nothing
    assert Event.objects.count() == 1


def test_early_in_its_sla_nothing_is_raised(hourly):
    make_execution(hourly, status="RUNNING", created=_ago(10), started=_ago(10))
    assert check_flow_slas() == 0
    assert not Event.objects.exists()


def test_finished_executions_are_never_at_risk_nor_missed(hourly):
    for status in ("COMMITTED", "FAILED", "CANCELLED", "SKIPPED"):
        make_execution(hourly, status=status, created=_ago(600), started=_ago(600), ended=_ago(1))
    assert check_flow_slas() == 0
    assert not Event.objects.filter(kind__startswith="sla.").exists()


def test_usual_duration_past_the_deadline_makes_it_at_risk_early(hourly):
    for minutes_ago in (400, 300, 200):
        finished_run(hourly, minutes_ago=minutes_ago, seconds=80 * 60, records=1)  # usually 80 min
    execution = make_execution(hourly, status="RUNNING", created=_ago(5), started=_ago(5))
    seen = expectation(execution, timezone.now())
    assert seen.expected_finish > seen.deadline and seen.at_risk and not seen.missed
    assert check_flow_slas() == 1
    assert "its usual duration puts the finish at" in Event.objects.get().message


def test_the_orchestrators_deadline_is_the_expected_completion(hourly):
    """Counted from launch like ENFORCE_FLOW_FINISH_DEADLINE, when that action exists."""
    execution = make_execution(hourly, status="RUNNING", created=_ago(50), started=_ago(5))
    Action.objects.create(
        flow_group="sales",
        flow_name="hourly",
        execution_id=execution.execution_id,
        kind="ENFORCE_FLOW_FINISH_DEADLINE",
        due_at=timezone.now() + timedelta(minutes=55),  # launched 5 minutes ago
    )
    assert check_flow_slas() == 0


def test_a_missed_deadline_is_raised_once_when_the_orchestrator_did_not(hourly, settings):
    settings.MONITORING_SLA_GRACE_SECONDS = 60
    late = make_execution(hourly, status="RUNNING", created=_ago(90), started=_ago(90))
    assert check_flow_slas() == 1
    event = Event.objects.get()
    assert event.kind == "sla.flow_finish_missed" and event.severity == "ERROR"
    assert event.execution_id == late.execution_id
    assert "is still running" in event.message
    assert check_flow_slas() == 0


def test_no_second_missed_event_after_the_orchestrators(hourly):
    late = make_execution(hourly, status="RUNNING", created=_ago(90), started=_ago(90))
    raise_event(
        "sla.flow_finish_missed",
        "Killed: did not finish within its SLA",
        flow_group="sales",
        flow_name="hourly",
        execution_id=late.execution_id,
    )
    assert check_flow_slas() == 0
    assert Event.objects.count() == 1


def test_the_default_sla_comes_from_settings(flow, settings):
    settings.FLOW_SLA_SECONDS = 600
    make_execution(flow, status="COMPILED", created=_ago(9))
    assert check_flow_slas() == 1
    assert Event.objects.get().kind == "sla.flow_finish_at_risk"


def test_a_failed_execution_is_alerted_once(flow):
    failed = make_execution(flow, status="FAILED", ended=timezone.now(), message="Job x failed: boom")
    make_execution(flow, status="FAILED", ended=_ago(24 * 60), message="long ago")
    assert check_failed_executions() == 1
    event = Event.objects.get()
    assert (event.kind, event.severity, event.execution_id) == (
        "execution.failed",
        "ERROR",
        failed.execution_id,
    )
    assert "boom" in event.message
    assert check_failed_executions() == 0


def test_run_monitors_runs_every_monitor_at_most_once_per_interval(hourly, settings, monkeypatch):
    settings.CELERY_BROKER_URL = "memory://"
    monkeypatch.setattr(monitors, "_next_run", 0.0)
    make_execution(hourly, status="RUNNING", created=_ago(55), started=_ago(55))
    report = run_monitors()
    assert report is not None and not report.failed
    assert report.raised["flow SLAs"] == 1
    assert run_monitors() is None  # throttled
    assert run_monitors(force=True).raised["flow SLAs"] == 0
