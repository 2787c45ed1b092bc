"""Stories of cron ticks becoming executions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from portal.flows import services as flow_services
from portal.flows.models import FlowConfig
from portal.orchestration.control.loop import OrchestratorLoop
from portal.orchestration.control.scheduler import db_epoch_millis, schedule_due_ticks
from portal.orchestration.models import FlowExecution, ScheduleCursor
from tests.factories import FlowConfigFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _ticks_written_as_they_come_due(settings):
    """These stories count the ticks each pass turns into executions as they come
    due; ticks written ahead (SCHEDULER_LOOKAHEAD_SECONDS) have their own stories
    in tests/unit/orchestration/control/test_ticks_ahead.py."""
    settings.SCHEDULER_LOOKAHEAD_SECONDS = 0


T0 = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC)
ON_TIME = timedelta(seconds=32)  # a scheduler polling every few seconds sees 12:01 at 12:01:02


def test_each_due_tick_becomes_one_execution(owner):
    flow = FlowConfigFactory(schedule="* * * * *", owner=owner)
    assert schedule_due_ticks(T0).created == 0  # first sight: start counting
    report = schedule_due_ticks(T0 + ON_TIME)
    assert report.created == 1
    execution = FlowExecution.objects.get()
    assert execution.flow == flow and execution.status == "PENDING"
    assert execution.scheduled_at == datetime(2026, 3, 1, 12, 1, tzinfo=UTC)
    # A second scheduler passing over the same moment adds nothing.
    assert schedule_due_ticks(T0 + ON_TIME).created == 0
    assert FlowExecution.objects.count() == 1


def test_a_flow_without_schedule_is_never_ticked(owner):
    FlowConfigFactory(schedule="", owner=owner)
    schedule_due_ticks(T0)
    schedule_due_ticks(T0 + timedelta(hours=1))
    assert not FlowExecution.objects.exists()


@pytest.mark.parametrize(("policy", "expected"), [("skip", 0), ("latest", 1), ("all", 10)])
def test_ticks_missed_while_no_scheduler_ran_follow_the_catch_up_policy(owner, policy, expected):
    FlowConfigFactory(schedule="* * * * *", owner=owner, properties={"flow.catchUpPolicy": policy})
    schedule_due_ticks(T0)
    report = schedule_due_ticks(T0 + timedelta(minutes=10, seconds=15))  # down until 12:10:45
    assert report.created == expected
    assert FlowExecution.objects.count() == expected


def test_a_changed_schedule_counts_from_the_change(owner):
    flow = FlowConfigFactory(schedule="0 * * * *", owner=owner)
    schedule_due_ticks(T0)
    flow.schedule = "* * * * *"
    flow.save()
    schedule_due_ticks(T0 + timedelta(minutes=5))
    assert ScheduleCursor.objects.get().schedule == "* * * * *"
    assert not FlowExecution.objects.exists()
    assert schedule_due_ticks(T0 + timedelta(minutes=5) + ON_TIME).created == 1


def test_execution_ids_are_epoch_milliseconds_from_the_database():
    before = int(datetime.now(UTC).timestamp() * 1000)
    value = db_epoch_millis()
    after = int(datetime.now(UTC).timestamp() * 1000)
    assert before - 2000 <= value <= after + 2000


def test_a_deleted_flow_is_unscheduled(owner):
    from portal.flows import services as flow_services

    flow = FlowConfigFactory(schedule="* * * * *", owner=owner)
    schedule_due_ticks(T0)
    flow_services.delete_flow(flow)
    assert schedule_due_ticks(T0 + timedelta(minutes=5)).created == 0
    assert not FlowExecution.objects.exists() and not ScheduleCursor.objects.exists()


def test_cron_ticks_follow_the_configured_time_zone(owner, settings):
    settings.TIME_ZONE = "Europe/Oslo"  # UTC+1 in March
    FlowConfigFactory(schedule="0 3 * * *", owner=owner)
    night = datetime(2026, 3, 1, 1, 0, tzinfo=UTC)
    schedule_due_ticks(night)
    assert schedule_due_ticks(night + timedelta(minutes=59, seconds=58)).created == 0  # 02:59:58 in Oslo
    assert schedule_due_ticks(night + timedelta(hours=1, seconds=2)).created == 1
    assert FlowExecution.objects.get().scheduled_at == datetime(2026, 3, 1, 2, 0, tzinfo=UTC)  # 03:00 Oslo


def test_a_pass_reads_only_the_cursors_that_are_due(owner):
    hourly = [FlowConfigFactory(schedule="0 * * * *", owner=owner) for _ in range(20)]
    every_minute = FlowConfigFactory(schedule="* * * * *", owner=owner)
    schedule_due_ticks(T0)  # first sight: each cursor learns its next tick
    assert ScheduleCursor.objects.get(flow=hourly[0]).next_tick == datetime(2026, 3, 1, 13, 0, tzinfo=UTC)
    untouched = dict(ScheduleCursor.objects.filter(flow__in=hourly).values_list("pk", "updated"))

    report = schedule_due_ticks(T0 + ON_TIME)

    assert report.created == 1
    assert FlowExecution.objects.get().flow == every_minute
    # The hourly flows were not due: no scheduler read or moved their cursors.
    assert dict(ScheduleCursor.objects.filter(flow__in=hourly).values_list("pk", "updated")) == untouched
    assert ScheduleCursor.objects.get(flow=every_minute).next_tick == datetime(2026, 3, 1, 12, 2, tzinfo=UTC)


def _scheduled_through_the_catalog(owner, schedule: str) -> FlowConfig:
    nodes("a", "b")
    executor("x1", "a>b")
    return flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "g",
            "flow_name": "hourly",
            "source": "a",
            "destinations": ["b"],
            "schedule": schedule,
            "properties": {"source.files.format": "csv"},
        },
    )


def test_the_catalog_keeps_each_cursor_in_step_so_a_pass_needs_no_catalog_join(owner):
    flow = _scheduled_through_the_catalog(owner, "0 * * * *")
    cursor = ScheduleCursor.objects.get(flow=flow)
    assert (cursor.schedule, cursor.last_tick, cursor.next_tick) == ("0 * * * *", None, None)
    schedule_due_ticks(T0, reconcile=False)  # first sight, found without reconcile's joins
    assert ScheduleCursor.objects.get(flow=flow).next_tick == datetime(2026, 3, 1, 13, 0, tzinfo=UTC)

    flow_services.update_flow(flow, data={"schedule": "*/5 * * * *"})
    assert ScheduleCursor.objects.get(flow=flow).next_tick is None  # to be worked out again
    schedule_due_ticks(T0 + timedelta(minutes=1), reconcile=False)
    assert ScheduleCursor.objects.get(flow=flow).next_tick == datetime(2026, 3, 1, 12, 5, tzinfo=UTC)

    flow_services.update_flow(flow, data={"schedule": "", "paused": True})
    assert not ScheduleCursor.objects.filter(flow=flow).exists()


def test_a_pass_says_when_the_next_tick_comes_so_the_loop_can_wake_for_it(owner):
    FlowConfigFactory(schedule="0 * * * *", owner=owner)
    FlowConfigFactory(schedule="*/15 * * * *", owner=owner, paused=True)  # paused: no wake-up for it
    assert schedule_due_ticks(T0).next_due == datetime(2026, 3, 1, 13, 0, tzinfo=UTC)
    assert ScheduleCursor.objects.count() == 2


def test_a_flow_written_around_the_catalog_is_found_by_reconciling(owner):
    flow = FlowConfigFactory(schedule="* * * * *", owner=owner)  # a bulk load: no catalog signal
    ScheduleCursor.objects.filter(flow=flow).delete()
    assert schedule_due_ticks(T0, reconcile=False).next_due is None
    schedule_due_ticks(T0)
    assert schedule_due_ticks(T0 + ON_TIME).created == 1
    FlowConfig.objects.filter(pk=flow.pk).update(schedule="")
    schedule_due_ticks(T0 + ON_TIME)
    assert not ScheduleCursor.objects.filter(flow=flow).exists()


def test_the_loop_reconciles_the_catalog_a_slice_at_a_time(owner, monkeypatch):
    """Each reconciliation joins only RECONCILE_SLICE flows, so its cost does
    not grow with the catalog; going round, it still finds every flow."""
    from portal.orchestration.control import scheduler

    monkeypatch.setattr(scheduler, "RECONCILE_SLICE", 2)
    flows = [FlowConfigFactory(schedule="* * * * *", owner=owner) for _ in range(5)]
    ScheduleCursor.objects.filter(flow__in=flows).delete()  # a bulk load: no catalog signal

    found = []
    start = 0
    for _ in range(3):
        report = schedule_due_ticks(T0, reconcile=start)
        found.append(ScheduleCursor.objects.filter(flow__in=flows).count())
        start = report.reconcile_next
    assert found == [2, 4, 5]
    # Past the last flow, the next slice starts from the first again.
    ScheduleCursor.objects.filter(flow=flows[0]).delete()
    assert schedule_due_ticks(T0, reconcile=start).reconcile_next == flows[0].pk + 2
    assert ScheduleCursor.objects.filter(flow=flows[0]).exists()


def test_the_loop_wakes_for_a_tick_instead_of_waiting_out_its_poll_interval(owner, settings):
    settings.SCHEDULER_POLL_SECONDS = 3600  # only the cursor's next tick can wake it
    FlowConfigFactory(schedule="* * * * *", owner=owner)
    wall = [T0]
    loop = OrchestratorLoop(clock=lambda: wall[0])
    loop.tick()  # first sight at 12:00:30: counts from there
    wall[0] = datetime(2026, 3, 1, 12, 0, 59, 900000, tzinfo=UTC)
    loop.tick()
    assert not FlowExecution.objects.exists()
    wall[0] = datetime(2026, 3, 1, 12, 1, 0, 100000, tzinfo=UTC)
    loop.tick()
    assert FlowExecution.objects.get().scheduled_at == datetime(2026, 3, 1, 12, 1, tzinfo=UTC)
