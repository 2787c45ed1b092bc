"""Stories of pausing and resuming a flow's schedule (Airflow's on/off switch)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from portal.flows.models import FlowConfig
from portal.orchestration.control.scheduler import schedule_due_ticks
from portal.orchestration.models import FlowExecution
from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.topology.helpers import nodes

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _ticks_written_as_they_come_due(settings):
    """These stories count the ticks each pass turns into executions as they come
    due; ticks written ahead (SCHEDULER_LOOKAHEAD_SECONDS) have their own stories
    in tests/unit/orchestration/test_ticks_ahead.py."""
    settings.SCHEDULER_LOOKAHEAD_SECONDS = 0


T0 = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC)
ON_TIME = timedelta(seconds=32)


def _minutely(owner, policy: str = "skip", **kw) -> FlowConfig:
    return FlowConfigFactory(
        schedule="* * * * *", owner=owner, properties={"flow.catchUpPolicy": policy}, **kw
    )


def test_a_paused_flow_makes_no_executions_from_its_ticks(owner):
    flow = _minutely(owner)
    schedule_due_ticks(T0)
    FlowConfig.objects.filter(pk=flow.pk).update(paused=True)
    for minute in range(1, 4):
        assert schedule_due_ticks(T0 + timedelta(minutes=minute) + ON_TIME).created == 0
    assert not FlowExecution.objects.exists()


@pytest.mark.parametrize(("policy", "expected"), [("skip", 0), ("latest", 1), ("all", 10)])
def test_on_resume_the_ticks_missed_while_paused_follow_the_catch_up_policy(owner, policy, expected):
    flow = _minutely(owner, policy)
    schedule_due_ticks(T0)  # first sight: counts from 12:00:30
    FlowConfig.objects.filter(pk=flow.pk).update(paused=True)
    schedule_due_ticks(T0 + timedelta(minutes=5))  # passed over while paused
    FlowConfig.objects.filter(pk=flow.pk).update(paused=False)
    report = schedule_due_ticks(T0 + timedelta(minutes=10, seconds=15))  # resumed at 12:10:45
    assert report.created == expected
    assert FlowExecution.objects.count() == expected
    # After the catch-up, the next tick runs on time again.
    assert schedule_due_ticks(T0 + timedelta(minutes=10) + ON_TIME).created == 1  # 12:11 at 12:11:02


def test_the_owner_pauses_and_resumes_from_the_flow_page(owner):
    flow = _minutely(owner, "latest")
    browser = Client()
    browser.force_login(owner)
    page = browser.get(f"/flows/{flow.flow_group}/{flow.flow_name}/").content.decode()
    assert "Pause schedule" in page and "Paused" not in page

    response = browser.post(f"/flows/{flow.flow_group}/{flow.flow_name}/pause/", follow=True)
    page = response.content.decode()
    flow.refresh_from_db()
    assert flow.paused and flow.paused_by == owner.username and flow.paused_at is not None
    assert "Resume schedule" in page and 'class="badge paused"' in page
    assert "catch-up policy <code>latest</code>" in page

    listing = browser.get("/flows/?paused=true").content.decode()
    assert str(flow) in listing and 'class="badge paused"' in listing
    assert str(flow) not in browser.get("/flows/?paused=false").content.decode()

    response = browser.post(f"/flows/{flow.flow_group}/{flow.flow_name}/resume/", follow=True)
    flow.refresh_from_db()
    assert not flow.paused and flow.paused_at is None and flow.paused_by == ""
    assert (
        "resumed: ticks missed while paused follow its catch-up policy (latest)" in response.content.decode()
    )


def test_only_those_who_may_change_the_flow_may_pause_it(owner):
    flow = _minutely(owner)
    stranger = Client()
    stranger.force_login(UserFactory())
    assert (
        "Pause schedule" not in stranger.get(f"/flows/{flow.flow_group}/{flow.flow_name}/").content.decode()
    )
    assert stranger.post(f"/flows/{flow.flow_group}/{flow.flow_name}/pause/").status_code == 403
    assert stranger.get(f"/flows/{flow.flow_group}/{flow.flow_name}/pause/").status_code == 405
    flow.refresh_from_db()
    assert not flow.paused


def test_the_api_pauses_without_editing_or_recompiling(owner):
    flow = _minutely(owner)
    updated_before = flow.updated
    api = api_client_for(owner)
    url = f"/api/flowconfigs/{flow.flow_group}/{flow.flow_name}"
    assert api.get(url).json()["paused"] is False

    response = api.patch(url, {"paused": True}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["paused"] is True and body["pausedBy"] == owner.username and body["pausedAt"]
    flow.refresh_from_db()
    assert flow.paused and flow.updated == updated_before  # the definition was not saved again

    listed = api.get("/api/flowconfigs?paused=true").json()
    assert [f["flowName"] for f in listed["results"]] == [flow.flow_name]
    assert api.get("/api/flowconfigs?paused=false").json()["results"] == []

    assert api.patch(url, {"paused": "maybe"}, format="json").status_code == 400
    assert api.patch(url, {"paused": False}, format="json").json()["paused"] is False
    assert api_client_for(UserFactory()).patch(url, {"paused": True}, format="json").status_code == 403


def test_a_flow_created_paused_does_not_run_immediately(owner):
    from tests.unit.templatepacks.factories import make_pack

    make_pack(owner)
    nodes("pg-orders", kind="jdbc")
    nodes("lake")
    api = api_client_for(owner)
    body = {
        "flowGroup": "sales",
        "flowName": "paused-at-birth",
        "schedule": "*/15 * * * *",
        "runImmediately": True,
        "paused": True,
        "templateUris": "pack://sales-pack/ingest/jdbc.template",
        "properties": {"source.jdbc.tables": "orders", "source.jdbc.schema": "s", "extract.is.full": "true"},
        "source": "pg-orders",
        "destinations": ["lake"],
    }
    response = api.post("/api/flowconfigs", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["paused"] is True
    assert not FlowExecution.objects.exists()


def test_an_execution_of_a_paused_flow_says_the_schedule_is_paused(owner):
    from tests.unit.orchestration.factories import FlowExecutionFactory

    flow = _minutely(owner, paused=True)
    execution = FlowExecutionFactory(flow=flow, status="COMMITTED")
    browser = Client()
    browser.force_login(owner)
    url = f"/executions/{flow.flow_group}/{flow.flow_name}/{execution.execution_id}/"
    assert '<span class="badge paused">schedule paused</span>' in browser.get(url).content.decode()
    FlowConfig.objects.filter(pk=flow.pk).update(paused=False)
    assert "schedule paused" not in browser.get(url).content.decode()


def test_a_paused_filter_that_is_neither_true_nor_false_is_refused_naming_it(owner):
    api = api_client_for(owner)
    answer = api.get("/api/flowconfigs?paused=maybe")
    assert answer.status_code == 400 and "paused" in answer.json(), answer.content
    assert api.get("/api/flowconfigs?paused=true").status_code == 200
