"""Quotas in the browser: staff give alice one concurrent job and two
executions an hour on the /quotas/ page. Alice's first run takes her one slot
(its job sits on an executor no worker consumes), her second run's job waits and
its page says why, her third run now is refused with the page saying which
quota, and /quotas/ shows her use and the waiting job."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from portal.orchestration.models import JobExecution, JobStatus
from tests import ldap_server
from tests.e2e import ui
from tests.integration.stack import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

WAITING = "waiting: alice at 1 of 1 concurrent jobs"


def run_now(page, flow_name: str) -> None:
    page.goto(f"/flows/e2e/{flow_name}/")
    page.locator("#flow-executions").get_by_role("button", name="Run now").click()


def test_staff_set_alices_quota_her_second_job_waits_saying_why_and_her_third_run_is_refused(
    page, browser, stack, logged_in, lake
):
    alice = logged_in("alice")  # her account exists from her first login on
    for name in ("cold-a", "cold-b", "cold-c"):
        ui.make_flow(alice, name, destination="cold")  # only the "idle" executor (no worker) reaches cold

    staff = browser.new_context(base_url=stack, viewport={"width": 1280, "height": 900})
    try:
        desk = staff.new_page()
        ui.log_in(desk, "dana", ldap_server.PEOPLE["dana"][0])
        desk.goto("/quotas/")
        desk.get_by_role("link", name="New quota").click()
        desk.get_by_label("Scope").select_option("USER")
        desk.get_by_label("User").select_option(label="alice")
        desk.get_by_label("Max concurrent jobs").fill("1")
        desk.get_by_label("Max executions per hour").fill("2")
        desk.get_by_role("button", name="Save").click()
        expect(desk).to_have_url(re.compile(r"/quotas/$"))
        expect(desk.locator("ul.messages")).to_contain_text("Quota for alice saved.")
        row = desk.locator("table tbody tr", has_text="alice")
        expect(row).to_contain_text("0 of 1")
        expect(row).to_contain_text("0 of 2")
    finally:
        staff.close()

    run_now(page, "cold-a")  # her one slot: the job waits for a worker, in flight
    expect(page).to_have_url(re.compile(r"/executions/e2e/cold-a/\d+/$"))
    # The execution's page opens as soon as it exists; the scheduler makes its job a moment later.
    first = wait_until(
        lambda: JobExecution.objects.filter(execution__flow_name="cold-a").first(), 30, "cold-a's job"
    )
    assert first.status == JobStatus.ORCHESTRATED

    run_now(page, "cold-b")
    expect(page).to_have_url(re.compile(r"/executions/e2e/cold-b/\d+/$"))
    expect(page.locator("#execution-status .job-message")).to_contain_text(WAITING, timeout=15_000)
    ui.screenshot(page, "quota-waiting-job")
    waiting = JobExecution.objects.get(execution__flow_name="cold-b")
    assert (waiting.status, waiting.message) == (JobStatus.PENDING, WAITING)

    run_now(page, "cold-c")  # a third execution this hour: past her hourly quota
    expect(page).to_have_url(re.compile(r"/executions/e2e/cold-c/$"))
    expect(page.locator("ul.messages")).to_contain_text(
        "Not started: Quota exceeded: alice at 2 of 2 executions started per hour."
    )
    assert not JobExecution.objects.filter(execution__flow_name="cold-c").exists()

    page.goto("/quotas/")
    expect(page.locator("table tbody tr", has_text="alice").first).to_contain_text("1 of 1")
    waiting_row = page.locator("table tbody tr", has_text="cold-b")
    expect(waiting_row).to_contain_text(WAITING)
