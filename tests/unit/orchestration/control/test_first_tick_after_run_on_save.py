"""A flow saved with "run immediately" (the demo's) starts a run at once; its schedule's first
tick often comes while that run is still warming up. That tick waits for the run on save and
then runs, rather than being recorded SKIPPED; later ticks are skipped as ever."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.orchestration.control.actions import process_actions
from portal.orchestration.control.scheduler import create_execution
from portal.orchestration.models import Action, ActionKind, ExecutionStatus, FlowExecution
from tests.unit.orchestration.factories import two_hop_flow

pytestmark = pytest.mark.django_db


def status_of(execution: FlowExecution) -> str:
    execution.refresh_from_db()
    return execution.status


def test_the_first_tick_waits_for_the_run_on_save_then_runs(owner):
    flow = two_hop_flow(owner)
    on_save = create_execution(flow, FlowExecution.Trigger.RUN_IMMEDIATELY)
    process_actions()
    assert status_of(on_save) in (ExecutionStatus.COMPILED, ExecutionStatus.RUNNING)

    now = timezone.now()
    # Ticks in the past: one still to come is written ahead and launched at its time (test_ticks_ahead).
    first_tick = create_execution(flow, FlowExecution.Trigger.SCHEDULE, now - timedelta(minutes=5))
    process_actions()
    assert status_of(first_tick) == ExecutionStatus.PENDING
    assert f"Waiting for execution {on_save.execution_id}" in first_tick.message
    waiting = Action.objects.get(kind=ActionKind.LAUNCH, execution_id=first_tick.execution_id, done_at=None)
    assert waiting.due_at > now

    # A second tick while the run on save still runs is skipped, as any tick behind a run.
    second_tick = create_execution(flow, FlowExecution.Trigger.SCHEDULE, now)
    process_actions()
    assert status_of(second_tick) == ExecutionStatus.SKIPPED
    assert str(on_save.execution_id) in second_tick.message

    # The run on save ends: the waiting first tick runs when it looks again.
    FlowExecution.objects.filter(pk=on_save.pk).update(
        status=ExecutionStatus.COMMITTED, ended_at=timezone.now()
    )
    Action.objects.filter(pk=waiting.pk).update(due_at=timezone.now())
    process_actions()
    assert status_of(first_tick) == ExecutionStatus.COMPILED


def test_a_tick_behind_a_run_now_is_still_skipped(owner):
    flow = two_hop_flow(owner)
    by_hand = create_execution(flow, FlowExecution.Trigger.RUN_NOW)
    process_actions()
    tick = create_execution(flow, FlowExecution.Trigger.SCHEDULE, timezone.now())
    process_actions()
    assert status_of(tick) == ExecutionStatus.SKIPPED
    assert str(by_hand.execution_id) in tick.message
