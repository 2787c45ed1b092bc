"""Gobblin's FlowExecutionClient and FlowStatusClient, replayed on the wire:
FlowStatusId keys, the latestFlowExecution / latestFlowGroupExecutions /
latestFlowStatus finders, kill as DELETE and the resume action. Status
answers speak Gobblin's ExecutionStatus."""

from __future__ import annotations

from datetime import timedelta

import pytest

from portal.orchestration.models import Action, ActionKind, ExecutionStatus, JobStatus
from portal.restli.records import GOBBLIN_STATUSES, gobblin_status
from tests.builders.restli import Wire
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory
from tests.unit.restli.pegasus import problems

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("packs")]


@pytest.fixture
def history(owner):
    """Flow team/nightly with three executions: committed, failed, running."""
    flow = FlowConfigFactory(flow_group="team", flow_name="nightly", owner=owner)
    done = FlowExecutionFactory(flow=flow, status=ExecutionStatus.COMMITTED)
    JobExecutionFactory(
        execution=done,
        job_name="team.nightly.1-pg-to-lake",
        status=JobStatus.COMMITTED,
        started_at=done.started_at,
        ended_at=done.started_at + timedelta(minutes=2),
        processed_count=42,
        low_watermark="2026-01-01",
        high_watermark="2026-01-02",
    )
    failed = FlowExecutionFactory(flow=flow, status=ExecutionStatus.FAILED, message="hop 1 failed")
    JobExecutionFactory(
        execution=failed, job_name="team.nightly.1-pg-to-lake", status=JobStatus.FAILED, message="boom"
    )
    JobExecutionFactory(execution=failed, job_name="team.nightly.2-lake-to-archive", status=JobStatus.SKIPPED)
    running = FlowExecutionFactory(flow=flow, status=ExecutionStatus.RUNNING)
    JobExecutionFactory(execution=running, job_name="team.nightly.1-pg-to-lake", status=JobStatus.RUNNING)
    return {"done": done, "failed": failed, "running": running}


def key(execution) -> str:
    return f"($params:(),flowExecutionId:{execution.execution_id},flowGroup:team,flowName:nightly)"


def test_every_flowport_state_has_a_gobblin_status():
    assert {gobblin_status(s) for s in ExecutionStatus.values} <= set(GOBBLIN_STATUSES)
    assert gobblin_status(ExecutionStatus.COMMITTED) == "COMPLETE"
    assert gobblin_status(ExecutionStatus.SKIPPED) == "CANCELLED"


def test_get_flow_execution(wire, history):
    done = history["done"]
    response = wire.send("GET", f"/flowexecutions/{key(done)}", restli_method="get")
    assert response.status_code == 200, response.content
    record = response.json()
    assert problems(record, "FlowExecution") == []
    assert record["id"] == {"flowGroup": "team", "flowName": "nightly", "flowExecutionId": done.execution_id}
    assert record["executionStatus"] == "COMPLETE"
    assert record["executionStatistics"]["executionStartTime"] == done.execution_id
    job = record["jobStatuses"][0]
    assert job["jobId"] == {"jobName": "team.nightly.1-pg-to-lake", "jobGroup": "team"}
    assert job["executionStatistics"]["processedCount"] == 42
    assert job["executionStatistics"]["jobProgress"] == 100
    assert job["jobState"] == {"lowWatermark": "2026-01-01", "highWatermark": "2026-01-02"}


def test_a_failed_execution_reports_issues_and_gobblin_statuses(wire, history):
    record = wire.send("GET", f"/flowexecutions/{key(history['failed'])}").json()
    assert problems(record, "FlowExecution") == []
    assert record["executionStatus"] == "FAILED"
    assert [j["executionStatus"] for j in record["jobStatuses"]] == ["FAILED", "CANCELLED"]
    assert record["issues"][0]["summary"] == "hop 1 failed"
    assert record["jobStatuses"][0]["issues"][0]["summary"] == "boom"


def test_an_unknown_execution_is_a_restli_404(wire, history):
    response = wire.send(
        "GET", "/flowexecutions/($params:(),flowExecutionId:1,flowGroup:team,flowName:nightly)"
    )
    assert response.status_code == 404
    assert response["X-RestLi-Error-Response"] == "true"
    assert "No flow execution found" in response.json()["message"]


def test_a_key_without_its_execution_id_is_a_restli_400_that_says_so(wire, history):
    for url in (
        "/flowexecutions/(flowGroup:team,flowName:nightly)",
        "/flowstatuses/(flowGroup:team,flowName:nightly)",
    ):
        response = wire.send("GET", url)
        assert response.status_code == 400
        assert response.json()["message"] == "Invalid key: flowExecutionId is required."


def test_latest_flow_execution_finder(wire, history):
    url = "/flowexecutions?q=latestFlowExecution&flowId=(flowGroup:team,flowName:nightly)"
    latest = wire.send("GET", url, restli_method="finder").json()
    assert [e["id"]["flowExecutionId"] for e in latest["elements"]] == [history["running"].execution_id]
    assert latest["elements"][0]["executionStatus"] == "RUNNING"
    # getLatestFlowExecution(flowId, count, tag, executionStatus)
    two = wire.send("GET", f"{url}&count=2", restli_method="finder").json()
    assert len(two["elements"]) == 2
    failed = wire.send("GET", f"{url}&count=5&executionStatus=FAILED&includeIssues=true").json()
    assert [e["id"]["flowExecutionId"] for e in failed["elements"]] == [history["failed"].execution_id]
    assert failed["elements"][0]["issues"]
    without_issues = wire.send("GET", f"{url}&count=5&executionStatus=FAILED").json()
    assert without_issues["elements"][0]["issues"] == []
    for element in two["elements"]:
        assert problems(element, "FlowExecution") == []
    bad = wire.send("GET", f"{url}&executionStatus=COMMITTED")
    assert bad.status_code == 400 and "COMPLETE" in bad.json()["message"]


def test_latest_flow_group_executions_finder(wire, history, owner):
    other = FlowConfigFactory(flow_group="team", flow_name="hourly", owner=owner)
    FlowExecutionFactory(flow=other, status=ExecutionStatus.COMMITTED)
    url = "/flowexecutions?q=latestFlowGroupExecutions&flowGroup=team"
    one_each = wire.send("GET", url, restli_method="finder").json()
    assert [(e["id"]["flowName"], e["executionStatus"]) for e in one_each["elements"]] == [
        ("hourly", "COMPLETE"),
        ("nightly", "RUNNING"),
    ]
    two_each = wire.send("GET", f"{url}&countPerFlow=2").json()
    assert [e["id"]["flowName"] for e in two_each["elements"]] == ["hourly", "nightly", "nightly"]


def test_kill_is_a_delete_and_resume_an_action(wire, history):
    running, failed = history["running"], history["failed"]
    killed = wire.send("DELETE", f"/flowexecutions/{key(running)}", restli_method="delete")
    assert killed.status_code == 200, killed.content
    assert Action.objects.filter(execution_id=running.execution_id, kind=ActionKind.KILL).exists()

    resumed = wire.send("POST", f"/flowexecutions/{key(failed)}?action=resume", {}, "action")
    assert resumed.status_code == 200, resumed.content
    assert Action.objects.filter(execution_id=failed.execution_id, kind=ActionKind.RESUME).exists()
    # Until the orchestrator picks the request up, Gobblin's clients read PENDING_RESUME.
    assert wire.send("GET", f"/flowexecutions/{key(failed)}").json()["executionStatus"] == "PENDING_RESUME"
    url = "/flowstatuses?q=latestFlowStatus&flowId=(flowGroup:team,flowName:nightly)&count=3"
    statuses = [e["executionStatus"] for e in wire.send("GET", url).json()["elements"]]
    assert statuses == ["RUNNING", "PENDING_RESUME", "COMPLETE"]
    Action.objects.filter(kind=ActionKind.RESUME).update(done_at=failed.started_at)
    assert wire.send("GET", f"/flowexecutions/{key(failed)}").json()["executionStatus"] == "FAILED"

    finished = wire.send("DELETE", f"/flowexecutions/{key(history['done'])}")
    assert finished.status_code == 409 and "already" in finished.json()["message"]


def test_only_the_owner_may_kill(history):
    outsider = Wire(UserFactory(username="oscar"))
    assert outsider.send("GET", f"/flowexecutions/{key(history['running'])}").status_code == 200
    denied = outsider.send("DELETE", f"/flowexecutions/{key(history['running'])}")
    assert denied.status_code == 403
    assert not Action.objects.filter(kind=ActionKind.KILL).exists()


def test_flow_status_client(wire, history):
    done = history["done"]
    record = wire.send("GET", f"/flowstatuses/{key(done)}", restli_method="get").json()
    assert problems(record, "FlowStatus") == []
    assert record["executionStatus"] == "COMPLETE"
    url = "/flowstatuses?q=latestFlowStatus&flowId=(flowGroup:team,flowName:nightly)&count=3"
    latest = wire.send("GET", url, restli_method="finder").json()
    assert [e["executionStatus"] for e in latest["elements"]] == ["RUNNING", "FAILED", "COMPLETE"]
    for element in latest["elements"]:
        assert problems(element, "FlowStatus") == []


def test_a_finder_without_its_parameter_says_which(wire, history):
    response = wire.send("GET", "/flowexecutions?q=latestFlowExecution")
    assert response.status_code == 400 and "flowId" in response.json()["message"]
    unknown = wire.send("GET", "/flowexecutions?q=nope")
    assert unknown.status_code == 400 and "no finder 'nope'" in unknown.json()["message"]


def test_the_api_keeps_flowports_own_status_names(history, owner):
    from tests.builders.api import api_client_for

    done = history["done"]
    response = api_client_for(owner).get(f"/api/flowexecutions/{done.execution_id}")
    assert response.json()["executionStatus"] == "COMMITTED"


def test_a_tick_written_ahead_is_no_flow_status_until_its_time(wire, history):
    """The scheduler writes a tick's execution up to a minute ahead; Gobblin's
    clients see it only once its tick has come (orchestration.models.ArrivedExecutions)."""
    from django.utils import timezone

    from portal.orchestration.models import FlowExecution

    tick = timezone.now() + timedelta(seconds=30)
    ahead = FlowExecutionFactory(
        flow=history["done"].flow,
        status=ExecutionStatus.PENDING,
        trigger=FlowExecution.Trigger.SCHEDULE,
        scheduled_at=tick,
        execution_id=int(tick.timestamp() * 1000),
        started_at=None,
    )
    url = "/flowstatuses?q=latestFlowStatus&flowId=(flowGroup:team,flowName:nightly)&count=3"
    statuses = [e["executionStatus"] for e in wire.send("GET", url).json()["elements"]]
    assert statuses == ["RUNNING", "FAILED", "COMPLETE"]
    assert wire.send("GET", f"/flowstatuses/{key(ahead)}", restli_method="get").status_code == 404
    assert wire.send("GET", f"/flowexecutions/{key(ahead)}", restli_method="get").status_code == 404
    FlowExecution.with_upcoming.filter(pk=ahead.pk).update(scheduled_at=timezone.now())  # its time
    statuses = [e["executionStatus"] for e in wire.send("GET", url).json()["elements"]]
    assert statuses[0] == "PENDING"
