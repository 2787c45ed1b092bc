"""Stories of people watching and steering flow executions through the API:
`/api/flowstatuses`, `/api/flowexecutions` (history, detail, kill, resume)
and `/api/flowconfigs/{group}/{name}/run`. Kill, resume and run go through
the real action rows and orchestrator (`process_actions`), no mocks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import resolve
from rest_framework.pagination import PageNumberPagination

from portal.orchestration.api import RunFlowView
from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import Action, ActionKind, FlowExecution, JobExecution
from portal.orchestration.worker import executor as spec_executor
from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import (
    T0,
    T0_MS,
    FlowExecutionFactory,
    JobExecutionFactory,
    two_hop_flow,
)

pytestmark = pytest.mark.django_db


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


@pytest.fixture
def flow(owner):
    return FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)


@pytest.fixture
def running(flow):
    """A running two-job execution of sales/orders: hop 1 committed, hop 2 running."""
    execution = FlowExecutionFactory(flow=flow, execution_id=T0_MS + 1000, started_at=T0)
    JobExecutionFactory(
        execution=execution,
        job_name="sales.orders.1-a-to-b",
        hop_index=1,
        executor="x1",
        status="COMMITTED",
        started_at=T0,
        ended_at=T0 + timedelta(minutes=2),
        message="1 task(s), 120 record(s) delivered (130 read, 10 rejected).",
        processed_count=120,
        records_read=130,
        records_rejected=10,
        low_watermark="100",
        high_watermark="220",
        log_excerpt="2026-03-01T12:00:01Z attempt 1 on w1\n",
        driver_log_excerpt="2026-03-01T12:00:02.000Z INFO [Thread-3] Executor: Running task 0.0 in stage 0.0\n",
    )
    JobExecutionFactory(
        execution=execution,
        job_name="sales.orders.2-b-to-c",
        hop_index=2,
        executor="x2",
        parents=["sales.orders.1-a-to-b"],
        status="RUNNING",
        attempt=2,
        started_at=T0 + timedelta(minutes=3),
        spark_ui_url="http://127.0.0.1:4040",
        progress={"tasks_total": 4, "tasks_completed": 1},
    )
    return execution


# --- FlowStatus --------------------------------------------------------------------


def test_the_flow_status_is_the_last_execution_with_its_job_statuses(api, flow, running, staff):
    FlowExecutionFactory(flow=flow, execution_id=T0_MS - 3_600_000, status="COMMITTED")  # an older one
    response = api.get("/api/flowstatuses/sales/orders")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["flowGroup"] == "sales" and body["flowName"] == "orders"
    assert body["flowExecutionId"] == T0_MS + 1000
    assert body["executionStartTime"] == ms(T0)
    assert body["executionEndTime"] is None
    assert body["executionStatus"] == "RUNNING"
    assert body["trigger"] == "RUN_NOW"
    assert body["pendingRequests"] == []
    first, second = body["jobStatuses"]
    assert first == {
        "flowName": "orders",
        "flowGroup": "sales",
        "jobName": "sales.orders.1-a-to-b",
        "jobGroup": "sales",
        "executionStartTime": ms(T0),
        "executionEndTime": ms(T0 + timedelta(minutes=2)),
        "executionStatus": "COMMITTED",
        "message": "1 task(s), 120 record(s) delivered (130 read, 10 rejected).",
        "processedCount": 120,
        "recordsRead": 130,
        "recordsRejected": 10,
        "lowWatermark": "100",
        "highWatermark": "220",
        "hopIndex": 1,
        "parents": [],
        "executor": "x1",
        "attempt": 1,
        "retries": 0,
        "tries": [
            {
                "attempt": 1,
                "cause": "first try",
                "status": "COMMITTED",
                "worker": "",
                "startTime": ms(T0),
                "endTime": ms(T0 + timedelta(minutes=2)),
                "message": "1 task(s), 120 record(s) delivered (130 read, 10 rejected).",
                "current": True,
            }
        ],
        "maxRetries": 0,
        "sparkUiUrl": "",
        "progress": {},
        "logExcerpt": "2026-03-01T12:00:01Z attempt 1 on w1\n",
        "driverLogExcerpt": "2026-03-01T12:00:02.000Z INFO [Thread-3] Executor: Running task 0.0 in stage 0.0\n",
    }
    assert second["parents"] == ["sales.orders.1-a-to-b"]
    assert (second["executor"], second["attempt"], second["executionStatus"]) == ("x2", 2, "RUNNING")
    assert second["sparkUiUrl"] == ""  # staff only (the UI shows every job its worker ran)
    staff_view = api_client_for(staff).get("/api/flowstatuses/sales/orders").json()["jobStatuses"][1]
    proxy = f"/executions/sales/orders/{T0_MS + 1000}/jobs/sales.orders.2-b-to-c/spark-ui/"
    assert staff_view["sparkUiUrl"] == f"http://testserver{proxy}"  # through the portal, never the bare port
    assert second["progress"] == {"tasksTotal": 4, "tasksCompleted": 1}  # camelCase like the record
    assert second["executionEndTime"] is None


@pytest.mark.parametrize(
    "url",
    [
        "/api/flowstatuses/(flowGroup:sales,flowName:orders)",
        "/api/flowstatuses/(flowName:orders,flowGroup:sales)",
    ],
)
def test_gaas_restli_key_form_answers_like_the_plain_path(api, running, url):
    assert api.get(url).json() == api.get("/api/flowstatuses/sales/orders").json()


def test_a_flow_without_executions_or_without_existence_is_a_clear_404(api, flow):
    never_ran = api.get("/api/flowstatuses/sales/orders")
    assert never_ran.status_code == 404
    assert never_ran.json() == {"detail": "Flow sales/orders has no execution yet."}
    missing = api.get("/api/flowstatuses/sales/nope")
    assert missing.status_code == 404
    assert missing.json() == {"detail": "No flow sales/nope."}
    assert api.get("/api/flowstatuses/(flowGroup:sales,flowName:nope)").status_code == 404


def test_a_deleted_flows_history_is_seen_by_staff_only(api, staff, owner):
    gone = FlowExecutionFactory(flow=None, flow_group="sales", flow_name="gone", status="COMMITTED")
    assert api.get("/api/flowstatuses/sales/gone").status_code == 404
    assert api.get(f"/api/flowexecutions/{gone.execution_id}").status_code == 404
    assert api.get("/api/flowexecutions").json()["count"] == 0
    staff_api = api_client_for(staff)
    assert staff_api.get("/api/flowstatuses/sales/gone").json()["flowExecutionId"] == gone.execution_id
    assert staff_api.get("/api/flowexecutions").json()["count"] == 1


# --- history ----------------------------------------------------------------------------


def test_history_is_newest_first_and_paginated(api, flow, monkeypatch):
    monkeypatch.setattr(PageNumberPagination, "page_size", 2)  # the project's pagination, smaller
    ids = [FlowExecutionFactory(flow=flow, status="COMMITTED").execution_id for _ in range(5)]
    first = api.get("/api/flowexecutions?flowGroup=sales&flowName=orders").json()
    assert first["count"] == 5
    assert [e["flowExecutionId"] for e in first["results"]] == sorted(ids, reverse=True)[:2]
    assert "jobStatuses" not in first["results"][0]
    assert first["next"] and first["previous"] is None
    last = api.get("/api/flowexecutions?flowGroup=sales&flowName=orders&page=3").json()
    assert [e["flowExecutionId"] for e in last["results"]] == [min(ids)]


def test_history_filters_by_flow_status_trigger_and_time(api, owner, flow):
    other = FlowConfigFactory(flow_group="hr", flow_name="people", owner=owner)
    early = FlowExecutionFactory(flow=flow, execution_id=T0_MS, status="COMMITTED")
    failed = FlowExecutionFactory(flow=flow, execution_id=T0_MS + 3_600_000, status="FAILED")
    late = FlowExecutionFactory(
        flow=flow, execution_id=T0_MS + 7_200_000, status="RUNNING", trigger=FlowExecution.Trigger.SCHEDULE
    )
    hr = FlowExecutionFactory(flow=other, execution_id=T0_MS + 60_000, status="COMMITTED")

    def ids(query: str) -> list[int]:
        response = api.get(f"/api/flowexecutions?{query}")
        assert response.status_code == 200, response.content
        return [e["flowExecutionId"] for e in response.json()["results"]]

    assert ids("flowGroup=hr") == [hr.execution_id]
    assert ids("flowGroup=sales&flowName=orders") == [
        late.execution_id,
        failed.execution_id,
        early.execution_id,
    ]
    assert ids("status=FAILED") == [failed.execution_id]
    assert ids("status=FAILED&status=RUNNING") == [late.execution_id, failed.execution_id]
    assert ids("trigger=SCHEDULE") == [late.execution_id]
    assert ids(f"since={T0_MS + 3_600_000}&flowGroup=sales") == [late.execution_id, failed.execution_id]
    assert ids("until=2026-03-01T12:30:00Z") == [hr.execution_id, early.execution_id]
    assert ids("since=2026-03-01T13:00:00%2B00:00&until=2026-03-01T13:00:00Z") == [failed.execution_id]


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("status=DONE", "status"),
        ("trigger=whenever", "trigger"),
        ("since=yesterday", "since"),
        ("until=2026-13-45T00:00:00", "until"),
        ("since=99999999999999999999999", "since"),
        ("flowGroup=a%00b", "flowGroup"),
    ],
)
def test_a_bad_filter_value_is_a_400_naming_the_parameter(api, query, parameter):
    response = api.get(f"/api/flowexecutions?{query}")
    assert response.status_code == 400
    assert parameter in response.json()


def test_the_history_list_does_not_query_per_execution(api, flow):
    FlowExecutionFactory.create_batch(3, flow=flow)
    with CaptureQueriesContext(connection) as three:
        api.get("/api/flowexecutions")
    FlowExecutionFactory.create_batch(7, flow=flow)
    with CaptureQueriesContext(connection) as ten:
        assert len(api.get("/api/flowexecutions").json()["results"]) == 10
    assert len(ten) == len(three)


def test_an_executions_job_statuses_do_not_query_per_job(api, flow):
    execution = FlowExecutionFactory(flow=flow)
    JobExecutionFactory.create_batch(2, execution=execution)
    with CaptureQueriesContext(connection) as two:
        api.get("/api/flowstatuses/sales/orders")
    JobExecutionFactory.create_batch(6, execution=execution)
    with CaptureQueriesContext(connection) as eight:
        assert len(api.get("/api/flowstatuses/sales/orders").json()["jobStatuses"]) == 8
    assert len(eight) == len(two)


# --- one execution ------------------------------------------------------------------------


def test_an_execution_by_id_has_its_job_statuses_and_log_excerpts(api, running):
    body = api.get(f"/api/flowexecutions/{running.execution_id}").json()
    assert body["flowExecutionId"] == running.execution_id
    assert [j["jobName"] for j in body["jobStatuses"]] == ["sales.orders.1-a-to-b", "sales.orders.2-b-to-c"]
    assert body["jobStatuses"][0]["logExcerpt"].startswith("2026-03-01T12:00:01Z")


def test_an_id_two_flows_share_needs_the_flow_to_choose(api, owner, flow):
    other = FlowConfigFactory(flow_group="hr", flow_name="people", owner=owner)
    FlowExecutionFactory(flow=flow, execution_id=T0_MS)
    FlowExecutionFactory(flow=other, execution_id=T0_MS, status="FAILED")
    ambiguous = api.get(f"/api/flowexecutions/{T0_MS}")
    assert ambiguous.status_code == 400
    errors = ambiguous.json()
    assert set(errors) == {"flowGroup", "flowName"}
    assert "hr/people, sales/orders" in errors["flowGroup"][0]
    chosen = api.get(f"/api/flowexecutions/{T0_MS}?flowGroup=hr&flowName=people")
    assert chosen.status_code == 200 and chosen.json()["executionStatus"] == "FAILED"
    # One of the two is enough when it settles the question.
    assert api.get(f"/api/flowexecutions/{T0_MS}?flowName=orders").json()["flowGroup"] == "sales"
    # Kill needs the same choice.
    assert api.post(f"/api/flowexecutions/{T0_MS}/kill").status_code == 400
    assert api.post(f"/api/flowexecutions/{T0_MS}/kill?flowGroup=sales&flowName=orders").status_code == 202


@pytest.mark.parametrize("execution_id", ["1", "9223372036854775808", "99999999999999999999999999"])
def test_unknown_or_impossible_ids_are_404(api, running, execution_id):
    response = api.get(f"/api/flowexecutions/{execution_id}")
    assert response.status_code == 404
    assert response.json()["detail"].startswith("No execution")
    assert api.post(f"/api/flowexecutions/{execution_id}/kill").status_code == 404


def test_a_mismatched_flow_filter_is_404(api, running):
    response = api.get(f"/api/flowexecutions/{running.execution_id}?flowGroup=hr")
    assert response.status_code == 404


# --- who may do what -----------------------------------------------------------------------

READS = [
    ("get", "/api/flowstatuses/sales/orders"),
    ("get", "/api/flowexecutions"),
    ("get", "/api/flowexecutions/{id}"),
]
ACTS = [
    ("post", "/api/flowexecutions/{id}/kill"),
    ("post", "/api/flowexecutions/{id}/resume"),
    ("post", "/api/flowconfigs/sales/orders/run"),
]


@pytest.mark.parametrize(("method", "url"), READS + ACTS)
def test_anonymous_callers_get_401(running, method, url):
    response = getattr(api_client_for(None), method)(url.format(id=running.execution_id))
    assert response.status_code == 401
    assert "WWW-Authenticate" in response


@pytest.mark.parametrize(("method", "url"), READS)
@pytest.mark.parametrize("who", ["owner", "outsider", "staff"])
def test_everyone_signed_in_reads_a_visible_flows_executions(request, running, method, url, who):
    client = api_client_for(request.getfixturevalue(who))
    assert getattr(client, method)(url.format(id=running.execution_id)).status_code == 200


@pytest.mark.parametrize(("method", "url"), ACTS)
def test_an_outsider_may_not_run_kill_or_resume(outsider, running, method, url):
    response = getattr(api_client_for(outsider), method)(url.format(id=running.execution_id), format="json")
    assert response.status_code == 403
    assert "owner or staff" in response.json()["detail"]
    assert not Action.objects.filter(kind__in=["KILL", "RESUME"]).exists()
    assert FlowExecution.objects.count() == 1


def test_staff_may_kill_anyones_execution(staff, running):
    response = api_client_for(staff).post(f"/api/flowexecutions/{running.execution_id}/kill")
    assert response.status_code == 202
    assert Action.objects.get(kind=ActionKind.KILL).payload == {"by": staff.username}


# --- kill / resume / run through the orchestrator -------------------------------------------------


def test_kill_queues_an_action_and_the_orchestrator_cancels_the_execution(api, owner, running):
    response = api.post(f"/api/flowexecutions/{running.execution_id}/kill")
    assert response.status_code == 202, response.content
    assert response.json()["executionStatus"] == "RUNNING"
    assert response.json()["pendingRequests"] == ["KILL"]
    action = Action.objects.get(kind=ActionKind.KILL)
    assert (action.flow_group, action.flow_name, action.execution_id) == (
        "sales",
        "orders",
        running.execution_id,
    )

    process_actions()
    running.refresh_from_db()
    assert running.cancel_requested
    assert running.message == f"Killed by {owner.username}."
    job = JobExecution.objects.get(job_name="sales.orders.2-b-to-c")
    assert job.cancel_requested  # the worker sees it on its next heartbeat
    # The worker stops and reports; the orchestrator rolls the execution up.
    spec_executor.report(job, job.attempt, "CANCELLED", message="Cancelled; nothing published.")
    process_actions()
    running.refresh_from_db()
    assert running.status == "CANCELLED"
    status = api.get("/api/flowstatuses/sales/orders").json()
    assert status["executionStatus"] == "CANCELLED" and status["executionEndTime"] is not None
    assert status["pendingRequests"] == []


def test_killing_a_finished_execution_is_a_409_with_the_reason(api, flow):
    done = FlowExecutionFactory(flow=flow, status="COMMITTED")
    response = api.post(f"/api/flowexecutions/{done.execution_id}/kill")
    assert response.status_code == 409
    assert response.json() == {"detail": f"Execution {done.execution_id} is already COMMITTED."}
    assert not Action.objects.exists()


def test_resume_reruns_the_failed_jobs(api, flow):
    failed = FlowExecutionFactory(flow=flow, status="FAILED", message="Job b failed: boom")
    JobExecutionFactory(execution=failed, job_name="a", status="COMMITTED", spec={"properties": {}})
    broken = JobExecutionFactory(
        execution=failed, job_name="b", hop_index=2, parents=["a"], status="FAILED", spec={"properties": {}}
    )
    response = api.post(f"/api/flowexecutions/{failed.execution_id}/resume")
    assert response.status_code == 202, response.content
    assert response.json()["pendingRequests"] == ["RESUME"]
    assert Action.objects.filter(kind=ActionKind.RESUME, execution_id=failed.execution_id).count() == 1

    process_actions()
    failed.refresh_from_db()
    broken.refresh_from_db()
    assert failed.status == "RUNNING" and failed.ended_at is None
    assert (broken.status, broken.attempt) == ("ORCHESTRATED", 2)  # dispatched again, a new attempt
    assert api.get(f"/api/flowexecutions/{failed.execution_id}").json()["jobStatuses"][1]["attempt"] == 2


def test_resuming_a_running_execution_is_a_409(api, running):
    response = api.post(f"/api/flowexecutions/{running.execution_id}/resume")
    assert response.status_code == 409
    assert "Only a failed or cancelled execution can be resumed" in response.json()["detail"]


def test_resuming_an_execution_without_jobs_to_rerun_is_a_409(api, flow):
    """One that failed before its jobs were created (a compile failure): the
    orchestrator's RESUME handler would silently do nothing."""
    failed = FlowExecutionFactory(flow=flow, status="FAILED", message="Compilation failed: no path")
    response = api.post(f"/api/flowexecutions/{failed.execution_id}/resume")
    assert response.status_code == 409
    assert "no failed, cancelled or skipped job to resume" in response.json()["detail"]
    assert not Action.objects.exists()


def test_the_run_route_is_not_shadowed_by_the_flow_api():
    assert resolve("/api/flowconfigs/sales/orders/run").func.view_class is RunFlowView


def test_run_now_launches_a_compiled_two_hop_flow_to_its_end(api, owner):
    two_hop_flow(owner)
    response = api.post("/api/flowconfigs/demo/a-to-c/run")
    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["executionStatus"], body["trigger"], body["jobStatuses"]) == ("PENDING", "RUN_NOW", [])
    assert body["pendingRequests"] == ["LAUNCH"]
    assert body["requestedBy"] == owner.username
    assert response["Location"] == (
        f"/api/flowexecutions/{body['flowExecutionId']}?flowGroup=demo&flowName=a-to-c"
    )
    assert Action.objects.filter(kind=ActionKind.LAUNCH, execution_id=body["flowExecutionId"]).exists()

    process_actions()  # LAUNCH: compile, create the jobs, dispatch hop 1
    status = api.get("/api/flowstatuses/demo/a-to-c").json()
    assert status["executionStatus"] == "COMPILED"
    hop1, hop2 = status["jobStatuses"]
    assert (hop1["jobName"], hop1["executor"], hop1["executionStatus"]) == (
        "demo.a-to-c.1-a-to-b",
        "x1",
        "ORCHESTRATED",
    )
    assert (hop2["executor"], hop2["executionStatus"], hop2["parents"]) == (
        "x2",
        "PENDING",
        [hop1["jobName"]],
    )

    # A worker takes hop 1 and commits it; the orchestrator sends hop 2.
    first = JobExecution.objects.get(job_name=hop1["jobName"])
    assert spec_executor.claim(first.pk, first.attempt, "w1") is not None
    assert api.get("/api/flowstatuses/demo/a-to-c").json()["executionStatus"] == "RUNNING"
    spec_executor.report(first, first.attempt, "COMMITTED", processed_count=7, high_watermark="7")
    process_actions()
    second = JobExecution.objects.get(job_name=hop2["jobName"])
    assert second.status == "ORCHESTRATED"
    spec_executor.claim(second.pk, second.attempt, "w2")
    spec_executor.report(second, second.attempt, "COMMITTED", processed_count=7)
    process_actions()
    final = api.get("/api/flowstatuses/demo/a-to-c").json()
    assert final["executionStatus"] == "COMMITTED"
    assert (
        final["message"] == "2 job(s) committed; delivered 7 record(s) to c."
    )  # not 14: hop 1 only moved them
    assert [j["processedCount"] for j in final["jobStatuses"]] == [7, 7]
    assert final["jobStatuses"][0]["highWatermark"] == "7"
    assert final["executionEndTime"] >= final["executionStartTime"]


def test_a_backfill_run_carries_its_bounds_to_the_first_hops_jobspec(api, owner):
    two_hop_flow(owner)
    backfill = {"backfill": {"orders": {"low": "100", "high": 200}}}
    response = api.post("/api/flowconfigs/demo/a-to-c/run", backfill, format="json")
    assert response.status_code == 202, response.content
    assert response.json()["trigger"] == "BACKFILL"
    assert response.json()["backfill"] == {"orders": {"low": "100", "high": "200"}}
    process_actions()
    first, second = JobExecution.objects.order_by("hop_index")
    assert first.spec["backfill"] == {"orders": {"low": "100", "high": "200"}}
    assert "backfill" not in second.spec


@pytest.mark.parametrize("low", ["", None])
def test_a_backfill_without_a_low_watermark_reads_from_the_first_record(api, owner, low):
    two_hop_flow(owner)
    body = {"backfill": {"orders": {"low": low, "high": "200"}}}
    response = api.post("/api/flowconfigs/demo/a-to-c/run", body, format="json")
    assert response.status_code == 202, response.content
    assert response.json()["backfill"] == {"orders": {"low": None, "high": "200"}}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"backfill": {"orders": {"low": "1"}}}, "backfill"),
        ({"backfill": {"orders": {"low": "1", "high": "2", "step": "1"}}}, "backfill"),
        ({"backfill": {"orders": {"low": True, "high": "2"}}}, "backfill"),
        ({"backfill": {"orders": {"low": "1", "high": ""}}}, "backfill"),
        ({"backfill": {" ": {"low": "1", "high": "2"}}}, "backfill"),
        ({"backfill": {"a\u0000b": {"low": "1", "high": "2"}}}, "backfill"),
        ({"backfill": ["orders"]}, "backfill"),
        ({"backfil": {}}, "backfil"),
        (["backfill"], "non_field_errors"),
    ],
)
def test_a_bad_run_request_is_a_400_naming_the_field(api, flow, body, field):
    response = api.post("/api/flowconfigs/sales/orders/run", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert not FlowExecution.objects.exists()


def test_running_a_flow_that_does_not_exist_is_404(api):
    response = api.post("/api/flowconfigs/sales/nope/run")
    assert response.status_code == 404
    assert response.json() == {"detail": "No flow sales/nope."}


def test_the_times_are_epoch_milliseconds(api, flow):
    started = datetime(2026, 3, 1, 12, 0, 0, 123000, tzinfo=UTC)
    FlowExecutionFactory(
        flow=flow, started_at=started, ended_at=started + timedelta(seconds=1), status="FAILED"
    )
    body = api.get("/api/flowstatuses/sales/orders").json()
    assert (body["executionStartTime"], body["executionEndTime"]) == (ms(started), ms(started) + 1000)


def test_a_long_history_counts_up_to_a_cap_and_says_so(api, flow, monkeypatch):
    from portal.orchestration import pagination

    monkeypatch.setattr(pagination, "COUNT_CAP", 3)
    monkeypatch.setattr(PageNumberPagination, "page_size", 2)
    ids = [FlowExecutionFactory(flow=flow, status="COMMITTED").execution_id for _ in range(5)]
    first = api.get("/api/flowexecutions").json()
    assert first["count"] == 3 and first["countCapped"] is True
    assert [e["flowExecutionId"] for e in first["results"]] == sorted(ids, reverse=True)[:2]
    narrow = api.get(f"/api/flowexecutions?until={sorted(ids)[1]}").json()
    assert narrow["count"] == 2 and narrow["countCapped"] is False
