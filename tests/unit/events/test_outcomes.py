"""A flow's outcome alerts, raised by the orchestrator as each execution ends:
the failure at once, the recovery whenever the flow's latest outcome turns
good again (a re-run job committing the failed execution itself included),
and a success only when a subscriber asked for one."""

from __future__ import annotations

import pytest
from django.db import transaction

from portal.events.models import Event, FlowOutcome
from portal.monitoring.models import Subscription
from portal.monitoring.monitors import check_failed_executions
from portal.orchestration import services
from portal.orchestration.control.actions import process_actions
from portal.orchestration.control.orchestrator import reevaluate_execution
from portal.orchestration.models import FlowExecution, JobExecution
from tests.builders.executions import make_execution
from tests.factories import FlowConfigFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def flow(owner):
    return FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner, properties={})


def _end(execution: FlowExecution, job_status: str) -> FlowExecution:
    """The worker reports its (only) job's end; the orchestrator rolls it up."""
    JobExecution.objects.filter(execution=execution).update(status=job_status)
    with transaction.atomic():
        reevaluate_execution(FlowExecution.objects.select_for_update().get(pk=execution.pk))
    execution.refresh_from_db()
    return execution


def _run(flow, job_status: str) -> FlowExecution:
    execution = make_execution(
        flow, status="RUNNING", jobs=[{"status": "RUNNING", "spec": {"properties": {}}}]
    )
    return _end(execution, job_status)


def _kinds() -> list[tuple[str, int | None]]:
    return list(Event.objects.order_by("id").values_list("kind", "execution_id"))


def test_a_failure_is_alerted_as_the_execution_ends_and_the_monitor_does_not_repeat_it(flow):
    failed = _run(flow, "FAILED")
    assert failed.status == "FAILED"
    event = Event.objects.get()
    assert (event.kind, event.severity, event.execution_id) == (
        "execution.failed",
        "ERROR",
        failed.execution_id,
    )
    assert event.message.startswith(f"{failed} failed: Job ")
    assert check_failed_executions() == 0  # the backstop sees the same key
    assert FlowOutcome.objects.get().good is False


def test_recovery_is_the_latest_outcome_turning_good_not_every_success(flow):
    first = _run(flow, "COMMITTED")
    failed = _run(flow, "FAILED")
    recovered = _run(flow, "COMMITTED")
    _run(flow, "COMMITTED")  # good after good: nothing to say
    assert _kinds() == [
        ("execution.failed", failed.execution_id),
        ("execution.recovered", recovered.execution_id),
    ]
    assert first.status == "COMMITTED"
    event = Event.objects.get(kind="execution.recovered")
    assert event.severity == "INFO" and "last outcome was a failure" in event.message


def test_a_re_run_job_that_commits_the_failed_execution_is_a_recovery(flow, owner):
    _run(flow, "COMMITTED")  # the flow's previous execution is a success: the old rule saw no failure
    failed = _run(flow, "FAILED")
    job = failed.jobs.get()

    services.rerun_job(failed, job.job_name, user=owner)
    process_actions()  # RESUME: the job is dispatched again
    failed.refresh_from_db()
    assert failed.status == "RUNNING"
    rerun = _end(failed, "COMMITTED")

    assert rerun.status == "COMMITTED"
    assert _kinds() == [
        ("execution.failed", failed.execution_id),
        ("execution.recovered", failed.execution_id),
    ]


def test_a_re_run_that_fails_again_is_a_second_failure(flow, owner):
    failed = _run(flow, "FAILED")
    services.rerun_job(failed, failed.jobs.get().job_name, user=owner)
    process_actions()
    again = _end(failed, "FAILED")
    assert again.status == "FAILED"
    assert _kinds() == [("execution.failed", failed.execution_id)] * 2
    assert check_failed_executions() == 0


def test_a_flow_that_last_failed_before_outcomes_were_kept_still_recovers(flow):
    before = make_execution(flow, status="FAILED")  # ended before this table existed: no outcome row
    assert not FlowOutcome.objects.exists() and before.status == "FAILED"
    recovered = _run(flow, "COMMITTED")
    assert _kinds() == [("execution.recovered", recovered.execution_id)]


def test_a_success_is_an_event_only_when_a_subscriber_asked_for_it(flow):
    _run(flow, "COMMITTED")
    assert _kinds() == []  # nobody asked: the dashboard's list stays quiet
    reader = UserFactory(username="sam")
    Subscription.objects.create(user=reader, flow=flow, on_failure=False, on_sla_miss=False, on_success=True)
    succeeded = _run(flow, "COMMITTED")
    assert _kinds() == [("execution.succeeded", succeeded.execution_id)]
    assert Event.objects.get().severity == "INFO"
    # A subscriber who left the company asks for nothing.
    reader.is_active = False
    reader.save()
    _run(flow, "COMMITTED")
    assert len(_kinds()) == 1
