"""A user whose run failed once and then committed on its retry sees both tries on the execution
page — which worker, when, why the first failed, why the second began — and, on the dataset's
page, the dataset's own lineage: where its job reads it from, where it delivers it, which flow
reads it next, in paths relative to the nodes' roots; at 1280 and 375 px."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect

from portal.orchestration.models import (
    DatasetState,
    FlowExecution,
    JobExecution,
    JobState,
    LineageEdge,
    TryCause,
)
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], f"the page scrolls sideways: {width}"


def retried_run(flow, lake) -> tuple[FlowExecution, JobExecution]:
    """The flow's run: its job failed on worker-a (the database refused it), then its retry
    committed on worker-b; its edges, and a report flow reading what it delivered."""
    execution = FlowExecution.objects.create(
        flow=flow,
        flow_group="e2e",
        flow_name=flow.flow_name,
        execution_id=int(T0.timestamp() * 1000),
        trigger=FlowExecution.Trigger.RUN_NOW,
        status="COMMITTED",
        started_at=T0,
        ended_at=T0 + timedelta(minutes=3),
    )
    source, delivered = str(lake / "landing" / "orders"), str(lake / "lake" / "e2e" / "orders")
    job = JobExecution.objects.create(
        execution=execution,
        job_name="e2e.orders.1-landing-to-lake",
        job_group="e2e",
        executor="ingest",
        queue="e2e.ingest",
        status="COMMITTED",
        attempt=2,
        retries=1,
        max_retries=2,
        worker="worker-b",
        started_at=T0 + timedelta(minutes=1),
        ended_at=T0 + timedelta(minutes=3),
        spec={"properties": {"source.files.path": source}},
    )
    JobState.objects.create(
        job=job,
        attempt=1,
        worker="worker-a",
        status="FAILED",
        message="Connection refused by db-1:5432",
        started_at=T0,
        ended_at=T0 + timedelta(seconds=40),
    )
    JobState.objects.create(
        job=job,
        attempt=2,
        cause=TryCause.RETRY,
        worker="worker-b",
        status="COMMITTED",
        message="1 task(s), 5 record(s) delivered",
        started_at=T0 + timedelta(minutes=1),
        ended_at=T0 + timedelta(minutes=3),
    )
    edge = {"source_namespace": "file", "target_namespace": "file", "seen": T0 + timedelta(minutes=3)}
    LineageEdge.objects.create(
        **edge,
        source_name=source,
        target_name=delivered,
        flow_group="e2e",
        flow_name=flow.flow_name,
        job_name=job.job_name,
        execution_id=execution.execution_id,
    )
    LineageEdge.objects.create(
        **edge,
        source_name=delivered,
        target_name=str(lake / "archive" / "e2e" / "orders"),
        flow_group="e2e",
        flow_name="report",
        job_name="e2e.report.1-lake-to-archive",
        execution_id=execution.execution_id + 1,
    )
    DatasetState.objects.create(
        flow_id=flow.pk,
        flow_group="e2e",
        flow_name=flow.flow_name,
        job_name=job.job_name,
        dataset_urn="orders",
        watermark="001796348793911:part-00001-3f2a9c1e-7b7d-4e2a-9a51-0c3b2f1d8e44-c000.snappy.parquet",
        execution_id=execution.execution_id,
    )
    return execution, job


def test_a_user_sees_the_failed_try_beside_the_retry_and_the_datasets_own_lineage(
    page, logged_in, lake, axe_source
):
    alice = logged_in("alice")  # not staff: she reads paths relative to the nodes' roots
    flow = ui.make_flow(alice, "orders")
    execution, job = retried_run(flow, lake)

    # The flows list: the last run committed, after an earlier try; on to the flow's page, whose
    # executions card says so too.
    page.goto("/flows/")
    row = page.locator('tr[data-flow="e2e/orders"]')
    expect(row.locator('[data-test="earlier-tries"]')).to_have_text("after 1 earlier try")
    ui.screenshot(page, "tries-flow-list-1280")
    row.get_by_role("link", name="e2e/orders").click()
    run = page.locator("#flow-executions tbody tr", has=page.locator('[data-test="earlier-tries"]'))
    expect(run).to_have_count(1)
    expect(run).to_contain_text("COMMITTED")
    expect(run.locator('[data-test="earlier-tries"]')).to_have_text("after 1 earlier try")
    ui.screenshot(page, "tries-flow-card-1280")

    # The run's page: COMMITTED, and both tries, the failed one with its reason.
    run.get_by_role("link").first.click()
    expect(page).to_have_url(re.compile(rf"/executions/e2e/orders/{execution.execution_id}/$"))
    tries = page.locator('[data-test="tries"] [data-test="try"]')
    expect(tries).to_have_count(2)
    expect(tries.first).to_contain_text("first try")
    expect(tries.first).to_contain_text("FAILED")
    expect(tries.first).to_contain_text("worker-a")
    expect(tries.first).to_contain_text("Connection refused by db-1:5432")
    expect(tries.nth(1)).to_contain_text("retry after a failure")
    expect(tries.nth(1)).to_contain_text("COMMITTED")
    log = f"/executions/e2e/orders/{execution.execution_id}/jobs/{job.job_name}/log/?attempt=1"
    expect(tries.first.get_by_role("link")).to_have_attribute("href", log)
    ui.screenshot(page, "tries-1280")
    violations = [v for v in ui.run_axe(page, axe_source) if v["impact"] in ui.SERIOUS]
    assert not violations, ui.describe_violations(violations)

    # The dataset's page: its source, where it went, who reads it; no server path, the watermark
    # as a time and a short file name with the stored value on hover.
    page.goto("/flows/e2e/orders/")
    page.get_by_role("table", name=re.compile("Datasets of")).get_by_role("link", name="orders").click()
    expect(page).to_have_url(re.compile(r"/monitoring/datasets/e2e/orders/"))
    expect(page.locator('[data-test="lineage-source"]')).to_contain_text("landing:orders")
    expect(page.locator('[data-test="delivered-to"]')).to_contain_text("lake:e2e/orders")
    expect(page.locator('[data-test="feeds"]')).to_contain_text("e2e/report")
    expect(page.locator('[data-test="feeds"]')).to_contain_text("archive:e2e/orders")
    expect(page.locator("#lineage")).not_to_contain_text(str(lake))
    expect(page.locator("#lineage")).not_to_contain_text("This dataset:")
    expect(page.locator("code[title^='001796348793911:']").first).to_contain_text("UTC, part-00001-")
    ui.screenshot(page, "dataset-lineage-1280")

    # On a phone: both pages fit the screen.
    page.set_viewport_size({"width": 375, "height": 812})
    no_sideways_scroll(page)
    ui.screenshot(page, "dataset-lineage-375")
    page.goto("/flows/e2e/orders/")
    expect(page.locator('#flow-executions [data-test="earlier-tries"]')).to_be_visible()
    no_sideways_scroll(page)
    ui.screenshot(page, "tries-flow-card-375")
    page.locator("#flow-executions tbody tr", has=page.locator('[data-test="earlier-tries"]')).get_by_role(
        "link"
    ).first.click()
    expect(page.locator('[data-test="tries"] [data-test="try"]')).to_have_count(2)
    no_sideways_scroll(page)
    ui.screenshot(page, "tries-375")
