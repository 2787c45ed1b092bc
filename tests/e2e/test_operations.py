"""What operators see: an SLA breach arriving on the open dashboard, and a
staff member adding an executor through the topology pages, after which a
flow that had no path compiles and runs."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from portal.events.models import Event
from portal.flows.models import FlowConfig
from portal.orchestration.models import FlowExecution, JobStatus
from portal.topology.models import SpecExecutor
from tests.builders.queues import IDLE_QUEUE, LATE_QUEUE
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_missed_job_start_deadline_shows_up_on_the_dashboard(context, page, logged_in, lake):
    alice = logged_in("alice")
    # "cold" is reached only through the "idle" executor, whose queue no worker consumes.
    ui.make_flow(
        alice,
        "to-cold",
        destination="cold",
        **{"gobblin.job.start.sla.time": "2", "gobblin.job.start.sla.timeunit": "SECONDS"},
    )
    page.goto("/")
    sla = page.locator("#dash-sla").locator("xpath=..")
    expect(sla).to_contain_text("No SLA breaches.")
    same_page = ui.SameDocument.mark(page)

    flow_page = context.new_page()
    flow_page.goto("/flows/e2e/to-cold/")
    flow_page.locator("#flow-executions").get_by_role("button", name="Run now").click()
    expect(flow_page).to_have_url(re.compile(r"/executions/e2e/to-cold/\d+/$"))
    flow_page.close()
    execution = FlowExecution.objects.get(flow_name="to-cold")

    expect(sla).to_contain_text("sla.job_start_missed", timeout=30_000)
    expect(sla.get_by_role("link", name=f"e2e/to-cold #{execution.execution_id}")).to_be_visible()
    expect(sla).to_contain_text("Did not start within its start deadline")
    failures = page.locator("#dash-failures").locator("xpath=..")
    expect(failures).to_contain_text(f"e2e/to-cold #{execution.execution_id}", timeout=15_000)
    assert same_page.swaps() >= 1
    ui.screenshot(page, "dashboard-sla-breach")

    execution.refresh_from_db()
    job = execution.jobs.get()
    assert (execution.status, job.status, job.queue) == ("FAILED", JobStatus.FAILED, IDLE_QUEUE)
    assert Event.objects.filter(kind="sla.job_start_missed", execution_id=execution.execution_id).count() == 1


def test_staff_add_an_executor_and_a_pending_flow_becomes_runnable(page, logged_in, lake):
    dana = logged_in("dana")
    assert dana.is_staff  # from the directory's flowport-staff group
    ui.make_flow(dana, "to-archive", destination="archive")
    flow = FlowConfig.objects.get(flow_name="to-archive")
    assert flow.compilation_status == "PENDING", flow.compilation_message

    page.goto("/flows/e2e/to-archive/")
    expect(page.locator("h2", has_text="Compilation").locator(".badge")).to_have_text(
        re.compile("pending", re.I)
    )
    ui.screenshot(page, "flow-detail-pending")

    page.goto("/topology/")
    ui.screenshot(page, "topology")
    page.get_by_role("link", name="New executor").click()
    expect(page).to_have_url(re.compile(r"/topology/executors/new/$"))
    page.get_by_label("Name").fill("replicate")
    page.get_by_label("Technology").select_option("spark-local")
    page.get_by_label("Location").fill("e2e-site")
    page.get_by_label("Queue (communication mechanism)").fill(LATE_QUEUE)
    page.get_by_label("Spark master").fill("local[2]")
    ui.screenshot(page, "executor-form")
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(re.compile(r"/topology/executors/replicate/$"))
    expect(page.locator(".messages")).to_contain_text("replicate saved")

    # Its capability lake → archive, added in place (htmx).
    same_page = ui.SameDocument.mark(page)
    capabilities = page.locator("#capabilities")
    capabilities.get_by_label("From", exact=True).select_option("lake")
    capabilities.get_by_label("to", exact=True).select_option("archive")
    capabilities.get_by_role("button", name="Add capability").click()
    expect(capabilities.locator("tbody tr").first).to_contain_text("lake")
    expect(capabilities.locator("tbody tr").first).to_contain_text("archive")
    assert same_page.swaps() >= 1  # in place: no page load
    ui.screenshot(page, "executor-detail")
    assert SpecExecutor.objects.get(name="replicate").queue == LATE_QUEUE

    # The topology change recompiled the pending flow: landing → lake → archive.
    page.goto("/flows/e2e/to-archive/")
    expect(page.locator("h2", has_text="Compilation").locator(".badge")).to_have_text(
        re.compile("compiled", re.I)
    )
    flow.refresh_from_db()
    assert flow.compilation_status == "COMPILED", flow.compilation_message

    page.locator("#flow-executions").get_by_role("button", name="Run now").click()
    expect(page).to_have_url(re.compile(r"/executions/e2e/to-archive/\d+/$"))
    same_page = ui.SameDocument.mark(page)
    expect(page.locator("#execution-status h2 .badge").first).to_have_text("COMMITTED", timeout=120_000)
    assert same_page.swaps() >= 1
    jobs = page.locator("article.dag-job")
    expect(jobs).to_have_count(2)
    expect(jobs.nth(0)).to_contain_text("ingest")
    expect(jobs.nth(1)).to_contain_text("replicate")
    ui.screenshot(page, "execution-two-hops")
    assert ui.published_ids(lake / "archive") == list(range(1, 6))
