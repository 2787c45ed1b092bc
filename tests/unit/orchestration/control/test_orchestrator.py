"""The orchestrator's rules, driven through action rows and the real
handlers in this process (the worker side is played by `executor.claim` and
`executor.report`, the same calls a Celery worker makes)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.events.models import Event
from portal.orchestration import services
from portal.orchestration.control.actions import enqueue_for, process_actions
from portal.orchestration.control.orchestrator import resend_unclaimed, sweep_lost_jobs
from portal.orchestration.models import (
    Action,
    ActionKind,
    ExecutionStatus,
    FlowExecution,
    JobExecution,
    JobState,
    JobStatus,
    OutboxMessage,
)
from portal.orchestration.state import statestore
from portal.orchestration.worker import executor
from portal.topology import services as topology
from portal.topology.models import SpecExecutor
from tests.builders.orchestration import jobs, play_worker
from tests.unit.orchestration.factories import two_hop_flow

pytestmark = pytest.mark.django_db


def launched(flow, user):
    execution = services.run_now(flow, user=user)
    process_actions()
    execution.refresh_from_db()
    return execution


def test_launch_compiles_the_flow_and_dispatches_only_the_first_hop(owner):
    execution = launched(two_hop_flow(owner), owner)
    first, second = jobs(execution)
    assert execution.status == ExecutionStatus.COMPILED
    assert (first.status, second.status) == (JobStatus.ORCHESTRATED, JobStatus.PENDING)
    message = OutboxMessage.objects.get()
    assert message.queue == first.queue
    assert message.kwargs["job_id"] == first.pk and message.kwargs["attempt"] == 1
    assert message.kwargs["jobspec"]["execution_id"] == execution.execution_id
    assert Action.objects.filter(kind=ActionKind.ENFORCE_JOB_START_DEADLINE, job_name=first.job_name).exists()


def test_a_child_is_dispatched_when_its_parent_commits_and_the_execution_commits_with_it(owner):
    execution = launched(two_hop_flow(owner), owner)
    first, second = jobs(execution)
    play_worker(first, processed_count=7)
    second.refresh_from_db()
    assert second.status == JobStatus.ORCHESTRATED
    play_worker(second, processed_count=7)
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.COMMITTED
    assert (
        execution.message == "2 job(s) committed; delivered 7 record(s) to c."
    )  # not 14: hop 1 only moved them


def test_a_failed_parent_skips_its_child_and_fails_the_execution(owner):
    execution = launched(two_hop_flow(owner), owner)
    first, second = jobs(execution)
    play_worker(first, JobStatus.FAILED, message="source unreachable")
    execution.refresh_from_db()
    second.refresh_from_db()
    assert second.status == JobStatus.SKIPPED and first.job_name in second.message
    assert execution.status == ExecutionStatus.FAILED and "source unreachable" in execution.message


def test_a_late_or_stale_update_never_moves_a_job_backwards(owner):
    execution = launched(two_hop_flow(owner), owner)
    first = jobs(execution)[0]
    play_worker(first)
    first.refresh_from_db()
    assert executor.report(first, 1, JobStatus.RUNNING) is False  # a late RUNNING after COMMITTED
    assert executor.report(first, 1, JobStatus.FAILED) is False  # a duplicate terminal status
    assert executor.claim(first.pk, 1, "another-worker") is None  # a redelivered message
    first.refresh_from_db()
    assert (first.status, first.worker) == (JobStatus.COMMITTED, "test-worker")


def test_a_failed_job_with_retries_left_comes_back_as_a_new_attempt_after_its_backoff(owner):
    flow = two_hop_flow(owner, properties={"job.retry.count": "1", "job.retry.backoff.seconds": "30"})
    execution = launched(flow, owner)
    first = jobs(execution)[0]
    play_worker(first, JobStatus.FAILED, message="flaky")
    first.refresh_from_db()
    assert (first.status, first.attempt, first.retries) == (JobStatus.PENDING, 2, 1)
    assert first.not_before > timezone.now() + timedelta(seconds=25)
    retry = Action.objects.get(kind=ActionKind.REEVALUATE, done_at__isnull=True)
    assert retry.due_at == first.not_before
    # The old attempt's messages are dead letters now.
    assert executor.claim(first.pk, 1, "late-worker") is None
    Action.objects.filter(pk=retry.pk).update(due_at=timezone.now())
    JobExecution.objects.filter(pk=first.pk).update(not_before=timezone.now())
    process_actions()
    first.refresh_from_db()
    assert first.status == JobStatus.ORCHESTRATED
    assert OutboxMessage.objects.filter(kwargs__attempt=2).count() == 1


def test_kill_cancels_waiting_jobs_and_asks_the_running_one_to_stop(owner):
    execution = launched(two_hop_flow(owner), owner)
    first, second = jobs(execution)
    executor.claim(first.pk, 1, "test-worker")
    services.kill(execution, user=owner)
    process_actions()
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == JobStatus.RUNNING and first.cancel_requested
    assert second.status == JobStatus.CANCELLED
    executor.report(first, 1, JobStatus.CANCELLED, message="Cancelled; nothing published.")
    process_actions()
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.CANCELLED
    assert execution.message == f"Killed by {owner.username}."


def test_resume_runs_the_failed_jobs_again(owner):
    execution = launched(two_hop_flow(owner), owner)
    first, second = jobs(execution)
    play_worker(first, JobStatus.FAILED, message="boom")
    services.resume(FlowExecution.objects.get(pk=execution.pk), user=owner)
    process_actions()
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.attempt) == (JobStatus.ORCHESTRATED, 2)
    assert second.status == JobStatus.PENDING
    play_worker(first)
    second.refresh_from_db()
    play_worker(second)
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.COMMITTED


def test_a_second_run_while_one_is_running_is_skipped_with_its_reason(owner):
    flow = two_hop_flow(owner)
    first = launched(flow, owner)
    second = launched(flow, owner)
    assert second.status == ExecutionStatus.SKIPPED
    assert str(first.execution_id) in second.message and "allowConcurrentExecution" in second.message


def test_concurrent_runs_are_allowed_when_the_flow_says_so(owner):
    flow = two_hop_flow(owner, properties={"flow.allowConcurrentExecution": "true"})
    launched(flow, owner)
    assert launched(flow, owner).status == ExecutionStatus.COMPILED


def test_an_execution_waits_for_the_topology_and_runs_when_it_changes(owner):
    flow = two_hop_flow(owner)
    topology.update_executor(SpecExecutor.objects.get(name="x2"), {"enabled": False})
    execution = launched(flow, owner)
    assert execution.status == ExecutionStatus.PENDING
    assert execution.message.startswith("Waiting for the topology:") and "x2" in execution.message
    topology.update_executor(SpecExecutor.objects.get(name="x2"), {"enabled": True})
    process_actions()
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.COMPILED


def test_a_job_nobody_starts_in_time_fails_with_an_event(owner):
    flow = two_hop_flow(
        owner, properties={"gobblin.job.start.sla.time": "5", "gobblin.job.start.sla.timeunit": "SECONDS"}
    )
    execution = launched(flow, owner)
    Action.objects.filter(kind=ActionKind.ENFORCE_JOB_START_DEADLINE).update(due_at=timezone.now())
    process_actions()
    first = jobs(execution)[0]
    execution.refresh_from_db()
    assert first.status == JobStatus.FAILED and "start deadline" in first.message
    assert execution.status == ExecutionStatus.FAILED
    assert Event.objects.get(kind="sla.job_start_missed").execution_id == execution.execution_id


def test_a_flow_past_its_finish_deadline_is_killed_with_an_event(owner):
    execution = launched(two_hop_flow(owner), owner)
    executor.claim(jobs(execution)[0].pk, 1, "test-worker")
    Action.objects.filter(kind=ActionKind.ENFORCE_FLOW_FINISH_DEADLINE).update(due_at=timezone.now())
    process_actions()
    execution.refresh_from_db()
    assert execution.cancel_requested and "SLA" in execution.message
    assert Event.objects.filter(kind="sla.flow_finish_missed", execution_id=execution.execution_id).exists()


def test_a_job_whose_worker_went_silent_is_redelivered_as_a_new_attempt(owner):
    execution = launched(two_hop_flow(owner), owner)
    first = jobs(execution)[0]
    claimed = executor.claim(first.pk, 1, "dead-worker")
    statestore.start_job_state(claimed, 1, "dead-worker")
    JobExecution.objects.filter(pk=first.pk).update(
        lease_until=timezone.now() - timedelta(seconds=1), log_excerpt="attempt 1 on dead-worker"
    )
    assert sweep_lost_jobs() == 1
    first.refresh_from_db()
    assert (first.status, first.attempt) == (JobStatus.ORCHESTRATED, 2)
    assert first.log_excerpt == ""  # attempt 1's tail is not attempt 2's
    assert executor.claim(first.pk, 1, "dead-worker") is None
    lost = JobState.objects.get(job=first, attempt=1)
    assert lost.status == JobStatus.FAILED and lost.ended_at and "dead-worker" in lost.message


def test_a_job_that_kills_every_worker_fails_as_a_poison_job_and_is_not_retried(owner, settings):
    """JOB_MAX_REDELIVERIES=2: three deliveries die without a report; the
    third loss fails the job (retries left or not) and its execution."""
    settings.JOB_MAX_REDELIVERIES = 2
    flow = two_hop_flow(owner, properties={"job.retry.count": "3"})
    execution = launched(flow, owner)
    first = jobs(execution)[0]
    for attempt in (1, 2, 3):
        assert executor.claim(first.pk, attempt, f"worker-{attempt}") is not None
        JobExecution.objects.filter(pk=first.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
        assert sweep_lost_jobs() == 1
        first.refresh_from_db()
        if attempt < 3:
            assert (first.status, first.attempt, first.redeliveries) == (
                JobStatus.ORCHESTRATED,
                attempt + 1,
                attempt,
            )
    assert (first.status, first.attempt, first.retries, first.redeliveries) == (JobStatus.FAILED, 3, 0, 3)
    assert first.message.startswith(
        "Poison job: its worker stopped heartbeating without reporting on each of 3 deliveries (the last on worker-3)"
    )
    process_actions()
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.FAILED
    assert not OutboxMessage.objects.filter(kwargs__attempt=4).exists()


def test_the_same_waiting_action_is_stored_once(owner):
    execution = launched(two_hop_flow(owner), owner)
    for _ in range(3):
        enqueue_for(execution, ActionKind.REEVALUATE)
    assert Action.objects.filter(kind=ActionKind.REEVALUATE, done_at__isnull=True).count() == 1


def test_a_failing_handler_is_retried_then_given_up_with_its_error(owner, monkeypatch):
    from portal.orchestration.control import actions

    execution = launched(two_hop_flow(owner), owner)
    enqueue_for(execution, ActionKind.REEVALUATE)

    def broken(action):
        raise RuntimeError("handler bug")

    monkeypatch.setitem(actions._handlers, ActionKind.REEVALUATE, broken)
    for _ in range(actions.MAX_ATTEMPTS):
        Action.objects.filter(kind=ActionKind.REEVALUATE).update(lease_until=None)
        process_actions()
    action = Action.objects.get(kind=ActionKind.REEVALUATE)
    assert action.done_at is not None and action.attempts == actions.MAX_ATTEMPTS
    assert "handler bug" in action.last_error


def test_bad_run_policies_are_refused_when_the_flow_is_saved(api):
    body = {
        "flowGroup": "sales",
        "flowName": "bad-policy",
        "source": "a",
        "destinations": ["b"],
        "properties": {"job.retry.count": "many"},
    }
    response = api.post("/api/flowconfigs", body, format="json")
    assert response.status_code == 400
    assert "job.retry.count: must be a number" in str(response.json())


def test_a_message_nobody_claimed_is_sent_again_for_the_same_attempt(owner):
    execution = launched(two_hop_flow(owner), owner)
    first = jobs(execution)[0]
    assert resend_unclaimed() == 0  # within its lease: nothing to do
    JobExecution.objects.filter(pk=first.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert resend_unclaimed() == 1
    sent = OutboxMessage.objects.filter(kwargs__job_id=first.pk)
    assert [m.kwargs["attempt"] for m in sent] == [1, 1]
    assert executor.claim(first.pk, 1, "w1") is not None  # one of the copies wins
    assert executor.claim(first.pk, 1, "w2") is None  # the other is a harmless duplicate


def test_a_flow_that_stopped_compiling_skips_its_ticks_with_the_reason_and_one_event(owner, settings):
    """A topology change after the save (here: data nodes closed to users without a grant) leaves
    a flow that cannot run: each tick is recorded once, SKIPPED with the reason; one event, not
    one per tick."""
    from portal.flows.models import FlowConfig
    from portal.orchestration.control.scheduler import create_execution

    flow = two_hop_flow(owner)
    FlowConfig.objects.filter(pk=flow.pk).update(schedule="*/5 * * * *")
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"
    ticks = [timezone.now() - timedelta(minutes=10), timezone.now() - timedelta(minutes=5)]
    executions = [create_execution(flow, FlowExecution.Trigger.SCHEDULE, tick) for tick in ticks]
    process_actions()
    for execution in executions:
        execution.refresh_from_db()
        assert execution.status == ExecutionStatus.SKIPPED
        assert execution.message.startswith("Not run: the flow cannot run: ")
        assert "may not read from data node 'a'" in execution.message
        assert not execution.jobs.exists()
    assert FlowExecution.objects.filter(flow=flow).count() == 2  # once per tick, no retries
    [event] = Event.objects.filter(kind="flow.cannot_run")
    assert "demo/a-to-c cannot run" in event.message and event.flow_name == "a-to-c"
    # Asked for explicitly, it fails and says why, as before.
    asked = launched(flow, owner)
    assert asked.status == ExecutionStatus.FAILED and asked.message.startswith("Compilation failed")
