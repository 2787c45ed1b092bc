"""Status at a glance: a flow's last run, next run and recent runs on the flow
list, a page at a time in a bounded number of queries, filterable by the last
run's state through an index; executions named for people beside their id."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.flows.filters import FlowConfigFilterSet
from portal.flows.models import FlowConfig
from portal.orchestration import services
from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import FINISHED_STATUSES, ExecutionStatus, FlowExecution, JobStatus
from portal.orchestration.state import glance
from tests.builders.orchestration import jobs, play_worker
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import T0_MS, FlowExecutionFactory, JobExecutionFactory, two_hop_flow

pytestmark = pytest.mark.django_db


def history(flow: FlowConfig, statuses: list[str], start: int = T0_MS) -> list[FlowExecution]:
    """Executions of `flow`, a minute apart, in this order of statuses (the last is the newest),
    written in one INSERT; the flow's last-run columns follow as note_run keeps them."""
    executions = FlowExecution.objects.bulk_create(
        FlowExecutionFactory.build(
            flow=flow,
            execution_id=start + index * 60_000,
            status=status,
            scheduled_at=datetime.fromtimestamp((start + index * 60_000) / 1000, tz=UTC),
        )
        for index, status in enumerate(statuses)
    )
    if executions:
        glance.note_run(executions[-1])
    return executions


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def list_queries(client: Client, path: str = "/flows/") -> tuple[int, str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200
    return len(captured), response.content.decode()


# --- the newest runs, a page at a time ------------------------------------------------------


def test_a_flows_strip_holds_its_newest_runs_oldest_first_and_its_last_run_delivered(owner):
    busy, quiet, never = (
        FlowConfigFactory(owner=owner, flow_name=name) for name in ("busy", "quiet", "never")
    )
    runs = history(busy, [ExecutionStatus.FAILED] * 12 + [ExecutionStatus.COMMITTED])
    history(quiet, [ExecutionStatus.CANCELLED])
    JobExecutionFactory(execution=runs[-1], job_name="hop1", status=JobStatus.COMMITTED, processed_count=7)
    final = {"properties": {"flowport.hop.destination": "lake"}}
    JobExecutionFactory(
        execution=runs[-1],
        job_name="hop2",
        parents=["hop1"],
        status=JobStatus.COMMITTED,
        processed_count=5,
        spec=final,
    )

    busy_glance, quiet_glance, never_glance = glance.for_flows([busy, quiet, never])

    assert [run.execution_id for run in busy_glance.runs] == [run.execution_id for run in runs[-10:]]
    assert busy_glance.last.status == ExecutionStatus.COMMITTED
    assert busy_glance.delivered == {"lake": 5}  # the final hop's records, not both hops'
    assert busy_glance.last_seconds == 300.0
    assert [run.status for run in quiet_glance.runs] == [ExecutionStatus.CANCELLED]
    assert never_glance.runs == [] and never_glance.last is None and not never_glance.last_pruned


def test_a_last_run_that_needed_a_retry_says_so_on_the_flow_list(owner):
    """A COMMITTED reached on a job's second try is not shown as a plain COMMITTED: the list
    says how many tries came before (Airflow shows the try number), from the jobs it reads anyway."""
    retried, smooth = (FlowConfigFactory(owner=owner, flow_name=name) for name in ("retried", "smooth"))
    runs = history(retried, [ExecutionStatus.COMMITTED])
    JobExecutionFactory(execution=runs[-1], job_name="load", status=JobStatus.COMMITTED, attempt=2)
    calm = history(smooth, [ExecutionStatus.COMMITTED])
    JobExecutionFactory(execution=calm[-1], job_name="load", status=JobStatus.COMMITTED, attempt=1)

    retried_glance, smooth_glance = glance.for_flows([retried, smooth])
    assert (retried_glance.earlier_tries, smooth_glance.earlier_tries) == (1, 0)

    page = client_for(owner).get("/flows/").content.decode()
    assert page.count('data-test="earlier-tries"') == 1 and "after 1 earlier try" in page


def test_a_page_of_busy_flows_costs_the_same_queries_as_a_page_of_one(owner, django_assert_max_num_queries):
    lonely = FlowConfigFactory(owner=owner, flow_group="aaa", flow_name="lonely", schedule="0 2 * * *")
    history(lonely, [ExecutionStatus.COMMITTED])
    client = client_for(owner)
    one_flow, _ = list_queries(client, "/flows/?flowGroup=aaa")

    for number in range(30):
        flow = FlowConfigFactory(
            owner=owner, flow_group="zzz", flow_name=f"busy-{number:02}", schedule="*/5 * * * *"
        )
        runs = history(flow, [ExecutionStatus.COMMITTED, ExecutionStatus.FAILED] * 30)
        JobExecutionFactory(execution=runs[-1], job_name="load", status=JobStatus.FAILED)

    with django_assert_max_num_queries(one_flow):
        _, page = list_queries(client, "/flows/?flowGroup=zzz")
    assert page.count('class="run-strip"') == 25  # a page of flows, each with its strip
    assert page.count('class="run ') == 25 * glance.STRIP_LENGTH
    assert "Page 1 of 2" in page


def query_plan(sql: str, params: Sequence[object] = ()) -> str:
    """How the database runs `sql`: PostgreSQL's EXPLAIN (sequential scans off, so an index it
    could use shows), SQLite's EXPLAIN QUERY PLAN."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute(f"EXPLAIN {sql}", params)
            return "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(row[-1] for row in cursor.fetchall())


def test_the_strip_query_reads_each_flows_newest_rows_from_its_index(owner):
    flows = [FlowConfigFactory(owner=owner, flow_name=f"f{number}") for number in range(3)]
    for flow in flows:
        history(flow, [ExecutionStatus.COMMITTED] * 30)
    with CaptureQueriesContext(connection) as captured:
        runs = glance.recent_runs([flow.pk for flow in flows], per_flow=4)
    assert [len(found) for found in runs.values()] == [4, 4, 4]
    (sql,) = (query["sql"] for query in captured.captured_queries)
    plan = query_plan(sql)
    assert plan.count("execution_flow_newest") == 3, plan
    if connection.vendor == "postgresql":
        assert plan.count("Limit") >= 3, plan
    else:  # each arm's subquery reads its top rows from the index; no arm scans the table
        assert "SCAN" not in plan.replace("SCAN CONSTANT ROW", ""), plan


# --- the last run, kept on the flow --------------------------------------------------------------


def test_a_flow_records_its_last_run_as_it_runs_and_a_late_older_run_never_hides_it(owner):
    flow = two_hop_flow(owner)
    execution = services.run_now(flow, user=owner)
    flow.refresh_from_db()
    assert (flow.last_run_id, flow.last_run_status) == (execution.execution_id, ExecutionStatus.PENDING)

    process_actions()
    first, _second = jobs(execution)
    play_worker(first)
    flow.refresh_from_db()
    assert flow.last_run_status == ExecutionStatus.RUNNING
    for job in jobs(execution):
        if job.status == JobStatus.ORCHESTRATED:
            play_worker(job, JobStatus.FAILED, message="boom")
    flow.refresh_from_db()
    assert flow.last_run_status == ExecutionStatus.FAILED

    older = FlowExecutionFactory(
        flow=flow, execution_id=execution.execution_id - 1, status=ExecutionStatus.COMMITTED
    )
    glance.note_run(older)
    flow.refresh_from_db()
    assert (flow.last_run_id, flow.last_run_status) == (execution.execution_id, ExecutionStatus.FAILED)


def test_the_list_filters_by_last_run_through_its_index(owner):
    failed, committed, running, _never = (
        FlowConfigFactory(owner=owner, flow_name=name) for name in ("failed", "committed", "running", "never")
    )
    history(failed, [ExecutionStatus.COMMITTED, ExecutionStatus.FAILED])
    history(committed, [ExecutionStatus.FAILED, ExecutionStatus.COMMITTED])
    history(running, [ExecutionStatus.COMMITTED, ExecutionStatus.COMPILED])

    def names(state: str) -> list[str]:
        filterset = FlowConfigFilterSet({"lastRun": state}, queryset=FlowConfig.objects.all())
        assert filterset.is_valid(), filterset.errors
        return [flow.flow_name for flow in filterset.qs]

    assert names("FAILED") == ["failed"]
    assert names("COMMITTED") == ["committed"]
    assert names("RUNNING") == ["running"]
    assert names("NEVER") == ["never"]
    assert not FlowConfigFilterSet({"lastRun": "BROKEN"}, queryset=FlowConfig.objects.all()).is_valid()

    filterset = FlowConfigFilterSet({"lastRun": "FAILED"}, queryset=FlowConfig.objects.all())
    plan = query_plan(*filterset.qs.query.sql_with_params())
    assert "flow_last_run_state" in plan, plan


def test_the_flow_api_filters_by_last_run_and_names_a_bad_state(owner, api):
    flow = FlowConfigFactory(owner=owner, flow_name="broken")
    history(flow, [ExecutionStatus.FAILED])
    FlowConfigFactory(owner=owner, flow_name="fine")

    answer = api.get("/api/flowconfigs", {"lastRun": "FAILED"})
    assert answer.status_code == 200
    (only,) = answer.json()["results"] if "results" in answer.json() else answer.json()
    assert (only["flowName"], only["lastRunStatus"]) == ("broken", "FAILED")
    assert only["lastRunId"] == T0_MS

    refused = api.get("/api/flowconfigs", {"lastRun": "BROKEN"})
    assert refused.status_code == 400 and "lastRun" in refused.json()


# --- on the pages ---------------------------------------------------------------------------------


def test_the_flow_list_shows_the_last_run_next_run_and_filters_by_state(owner, settings):
    settings.TIME_ZONE = "UTC"
    daily = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders-daily", schedule="0 2 * * *")
    runs = history(daily, [ExecutionStatus.COMMITTED, ExecutionStatus.FAILED])
    FlowConfigFactory(owner=owner, flow_group="sales", flow_name="fresh")
    client = client_for(owner)

    page = client.get("/flows/").content.decode()
    assert "orders-daily · 2026-03-01 12:01" in page  # the last run, by its readable name
    assert f"/executions/sales/orders-daily/{runs[-1].execution_id}/" in page
    assert "Never run" in page
    assert 'data-label="Next run"' in page and ">02:00<" not in page  # a date with the time

    failed = client.get("/flows/", {"lastRun": "FAILED"}, headers={"HX-Request": "true"}).content.decode()
    assert "orders-daily" in failed and "sales/fresh" not in failed
    never = client.get("/flows/", {"lastRun": "NEVER"}).content.decode()
    assert "sales/fresh" in never and "sales/orders-daily" not in never


def test_the_flow_page_lists_the_next_runs_and_none_while_paused(owner, settings):
    settings.TIME_ZONE = "UTC"
    flow = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="hourly", schedule="0 * * * *")
    client = client_for(owner)

    page = client.get("/flows/sales/hourly/").content.decode()
    assert page.count('class="next-run"') == 5

    flow.paused = True
    flow.save()
    page = client.get("/flows/sales/hourly/").content.decode()
    assert 'class="next-run"' not in page and "none while paused" in page


def test_an_execution_has_a_readable_name_beside_its_id_on_its_pages_and_in_the_api(owner, api, settings):
    settings.TIME_ZONE = "Europe/Paris"
    flow = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders-daily")
    tick = datetime(2026, 11, 26, 1, 0, tzinfo=UTC)
    execution = FlowExecutionFactory(flow=flow, scheduled_at=tick, status=ExecutionStatus.COMMITTED)
    by_hand = FlowExecutionFactory(flow=flow, execution_id=execution.execution_id + 1)

    assert execution.display_name == "orders-daily · 2026-11-26 02:00"  # the tick, in local time
    assert by_hand.display_name.startswith("orders-daily · ")  # when it was asked for
    assert by_hand.logical_date == by_hand.created

    client = client_for(owner)
    detail = client.get(f"/executions/sales/orders-daily/{execution.execution_id}/").content.decode()
    assert "orders-daily · 2026-11-26 02:00" in detail and str(execution.execution_id) in detail
    listing = client.get("/executions/").content.decode()
    assert "orders-daily · 2026-11-26 02:00" in listing

    status = api.get("/api/flowexecutions", {"flowGroup": "sales", "flowName": "orders-daily"}).json()
    rows = status["results"] if isinstance(status, dict) and "results" in status else status
    named = {row["flowExecutionId"]: row["displayName"] for row in rows}
    assert named[execution.execution_id] == "orders-daily · 2026-11-26 02:00"


def test_a_pruned_last_run_still_says_how_the_flow_last_ran(owner):
    flow = FlowConfigFactory(owner=owner, flow_name="old", schedule="")
    (run,) = history(flow, [ExecutionStatus.FAILED])
    run.delete()
    flow.refresh_from_db()
    (seen,) = glance.for_flows([flow])
    assert seen.last is None and seen.last_pruned
    assert seen.next_run is None  # run on demand only
    page = client_for(owner).get("/flows/").content.decode()
    assert "its record was pruned" in page


def test_the_flow_catalog_names_the_last_run_states_as_executions_do():
    """flows sits below orchestration, so it spells the states out; they must stay the same."""
    unfinished = {status for status in ExecutionStatus.values if status not in FINISHED_STATUSES}
    assert set(FlowConfig.UNFINISHED_RUN_STATUSES) == unfinished
    finished = set(FlowConfig.LastRun.values) - {FlowConfig.LastRun.RUNNING, FlowConfig.LastRun.NEVER}
    assert finished == set(FINISHED_STATUSES)
