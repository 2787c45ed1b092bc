"""Stories of ticks written ahead of their time (SCHEDULER_LOOKAHEAD_SECONDS).

The scheduler writes a tick's execution and its LAUNCH (due at the tick) up to
a minute before the tick comes, so a top of the hour's burst is committed
before it. Until the tick nobody sees it but its flow's page (as upcoming),
nothing launches it, and pausing, re-scheduling or deleting the flow takes it back.
The clock is Django's, moved by hand (`clock`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from portal.flows import services as flow_services
from portal.flows.models import FlowConfig
from portal.monitoring import dashboard
from portal.orchestration.control.actions import process_actions
from portal.orchestration.control.commands import relaunch_waiting
from portal.orchestration.control.loop import OrchestratorLoop
from portal.orchestration.control.scheduler import schedule_due_ticks
from portal.orchestration.models import Action, ActionKind, FlowExecution, ScheduleCursor
from portal.orchestration.state.retention import prune_history
from tests.builders.api import api_client_for
from tests.unit.orchestration.factories import two_hop_flow

pytestmark = pytest.mark.django_db
T0 = datetime(2030, 3, 1, 12, 0, 30, tzinfo=UTC)
TICK = datetime(2030, 3, 1, 12, 1, tzinfo=UTC)


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def clock(monkeypatch, settings):
    settings.SCHEDULER_LOOKAHEAD_SECONDS = 60
    now = Clock(T0)
    monkeypatch.setattr(timezone, "now", now)
    return now


def _minutely(owner, policy: str = "skip"):
    return two_hop_flow(
        owner, schedule="* * * * *", properties={"flow.catchUpPolicy": policy, "source.files.format": "csv"}
    )


def _launches() -> int:
    return Action.objects.filter(kind=ActionKind.LAUNCH, done_at__isnull=True).count()


def test_a_tick_written_ahead_is_not_launched_before_its_time_and_is_launched_at_it(owner, clock):
    flow = _minutely(owner)
    report = schedule_due_ticks(T0)  # 12:00:30: 12:01 is within the look-ahead

    assert (report.created, report.ahead) == (1, 1)
    ahead = FlowExecution.with_upcoming.get()
    assert ahead.flow == flow and ahead.status == "PENDING" and ahead.scheduled_at == TICK
    # Written as if made at its tick: its id, its creation time and its LAUNCH's due time.
    assert ahead.execution_id == int(TICK.timestamp() * 1000) and ahead.created == TICK
    assert Action.objects.get(kind=ActionKind.LAUNCH).due_at == TICK
    assert not FlowExecution.objects.exists()  # nobody else sees it yet

    clock.at = TICK - timedelta(milliseconds=100)
    relaunch_waiting()  # a topology change relaunches waiting executions: not this one
    assert process_actions() == 0
    assert FlowExecution.with_upcoming.get().status == "PENDING" and _launches() == 1

    clock.at = TICK
    assert process_actions() >= 1
    launched = FlowExecution.objects.get()
    assert launched.pk == ahead.pk and launched.status != "PENDING" and launched.jobs.exists()
    flow.refresh_from_db()
    assert flow.last_run_id == ahead.execution_id  # its last run is noted when it launches


def test_two_schedulers_write_one_execution_per_tick(owner, clock):
    _minutely(owner)
    schedule_due_ticks(T0)
    # A second scheduler that read the cursor before the first one's commit.
    ScheduleCursor.objects.update(last_tick=T0, next_tick=TICK)
    report = schedule_due_ticks(T0 + timedelta(milliseconds=5))
    assert (report.created, report.already_there) == (0, 1)
    assert FlowExecution.with_upcoming.count() == 1 and _launches() == 1


def test_the_loop_writes_the_next_tick_a_look_ahead_before_it(owner, clock, settings):
    settings.SCHEDULER_POLL_SECONDS = 3600  # only the next tick can wake it
    _minutely(owner)
    loop = OrchestratorLoop(clock=clock)
    loop.tick()  # 12:00:30: writes 12:01; the next unwritten tick is 12:02
    assert list(FlowExecution.with_upcoming.values_list("scheduled_at", flat=True)) == [TICK]

    clock.at = datetime(2030, 3, 1, 12, 0, 59, 900000, tzinfo=UTC)
    loop.tick()
    assert FlowExecution.with_upcoming.count() == 1
    clock.at = datetime(2030, 3, 1, 12, 1, 0, 100000, tzinfo=UTC)  # 12:02 comes within a minute
    loop.tick()  # and 12:01's LAUNCH is claimed by the same pass
    assert [e.scheduled_at.minute for e in FlowExecution.with_upcoming.order_by("scheduled_at")] == [1, 2]
    assert FlowExecution.objects.get().scheduled_at == TICK  # only 12:01 is there for anyone
    assert FlowExecution.objects.get().status != "PENDING"


@pytest.mark.parametrize(("policy", "expected"), [("skip", 0), ("latest", 1), ("all", 10)])
def test_pausing_takes_the_tick_back_and_resume_follows_the_catch_up_policy(owner, clock, policy, expected):
    flow = _minutely(owner, policy)
    schedule_due_ticks(T0)
    assert FlowExecution.with_upcoming.count() == 1

    clock.at = T0 + timedelta(seconds=10)
    flow_services.set_paused(flow, True, by="olivia")
    assert not FlowExecution.with_upcoming.exists() and _launches() == 0
    assert ScheduleCursor.objects.get(flow=flow).last_tick == clock.at  # back to the pause
    clock.at = TICK + timedelta(seconds=2)
    assert schedule_due_ticks(clock.at).created == 0  # passed over while paused
    assert process_actions() == 0

    clock.at = T0 + timedelta(minutes=10, seconds=15)  # resumed at 12:10:45
    flow_services.set_paused(flow, False)
    report = schedule_due_ticks(clock.at)
    # The missed ticks 12:01…12:10 as without look-ahead; 12:11 written ahead as ever.
    assert FlowExecution.objects.count() == expected
    assert FlowExecution.with_upcoming.upcoming().get().scheduled_at == TICK + timedelta(minutes=10)
    assert report.created == expected + 1


def _through_the_catalog(owner, schedule: str):
    flow = _minutely(owner)
    return flow_services.update_flow(flow, data={"schedule": schedule})


def test_a_changed_schedule_replaces_the_tick_written_ahead(owner, clock):
    clock.at = datetime(2030, 3, 1, 12, 45, 30, tzinfo=UTC)
    flow = _through_the_catalog(owner, "46 * * * *")
    schedule_due_ticks(clock.at)  # first sight: counts from now
    schedule_due_ticks(clock.at)  # the loop's next pass, at once: 12:46 is within a minute
    assert FlowExecution.with_upcoming.get().scheduled_at.minute == 46

    clock.at += timedelta(seconds=5)
    flow = flow_services.update_flow(flow, data={"schedule": "*/15 * * * *"})
    assert not FlowExecution.with_upcoming.exists() and _launches() == 0
    schedule_due_ticks(clock.at)
    assert not FlowExecution.with_upcoming.exists()  # 13:00 is not within a minute yet
    assert ScheduleCursor.objects.get(flow=flow).next_tick == datetime(2030, 3, 1, 13, 0, tzinfo=UTC)
    clock.at = datetime(2030, 3, 1, 12, 59, 30, tzinfo=UTC)
    schedule_due_ticks(clock.at)
    assert FlowExecution.with_upcoming.get().scheduled_at == datetime(2030, 3, 1, 13, 0, tzinfo=UTC)

    flow_services.update_flow(flow, data={"schedule": ""})  # scheduling switched off
    assert not FlowExecution.with_upcoming.filter(scheduled_at__isnull=False).exists()
    assert not ScheduleCursor.objects.exists()


def test_deleting_the_flow_takes_its_tick_back(owner, clock):
    flow = _minutely(owner)
    schedule_due_ticks(T0)
    flow_services.delete_flow(flow)
    assert not FlowExecution.with_upcoming.exists() and not Action.objects.exists()


def test_the_pages_show_a_tick_written_ahead_as_upcoming_and_nothing_else_counts_it(owner, clock):
    flow = _minutely(owner)
    schedule_due_ticks(T0)
    browser = Client()
    browser.force_login(owner)

    card = browser.get(f"/executions/{flow.flow_group}/{flow.flow_name}/", HTTP_HX_REQUEST="true")
    page = card.content.decode()
    assert 'class="badge upcoming"' in page and "scheduled for" in page and "12:01:00" in page
    assert "badge pending" not in page and "No executions yet" not in page
    assert 'hx-trigger="every 2s"' in page  # it follows the tick into its run

    ahead = FlowExecution.with_upcoming.get()
    assert str(ahead.execution_id) not in browser.get("/executions/").content.decode()
    assert api_client_for(owner).get("/api/flowexecutions").json()["results"] == []
    url = f"/executions/{flow.flow_group}/{flow.flow_name}/{ahead.execution_id}/"
    assert browser.get(url).status_code == 404
    assert dashboard.backlog(T0)["pending"] == 0
    assert prune_history(1.0, now=T0 + timedelta(days=400)).executions == 0
    assert FlowExecution.with_upcoming.filter(pk=ahead.pk).exists()

    clock.at = TICK  # its time: a PENDING execution like any other, until it launches
    page = browser.get(f"/executions/{flow.flow_group}/{flow.flow_name}/").content.decode()
    assert "badge upcoming" not in page and "badge pending" in page
    assert [
        e["flowExecutionId"] for e in api_client_for(owner).get("/api/flowexecutions").json()["results"]
    ] == [ahead.execution_id]


def test_a_flow_paused_around_the_catalog_loses_its_tick_at_the_next_reconciliation(owner, clock):
    flow = _minutely(owner)
    schedule_due_ticks(T0)
    FlowConfig.objects.filter(pk=flow.pk).update(paused=True)  # a restore: no signal
    clock.at = T0 + timedelta(seconds=5)
    schedule_due_ticks(clock.at, reconcile=0)
    assert not FlowExecution.with_upcoming.exists() and _launches() == 0
    assert ScheduleCursor.objects.get(flow=flow).last_tick == clock.at
