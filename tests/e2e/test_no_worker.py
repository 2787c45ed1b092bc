"""A job sent to an executor no worker consumes: the
execution page says so at once, with the command that starts a worker, and
the executor's health says it too. Killed and resumed, the page follows the
execution on its own (no reload) and says it again."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from portal.orchestration.control.liveness import worker_command
from portal.orchestration.models import FlowExecution
from tests.builders.queues import IDLE_QUEUE
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_job_nobody_consumes_is_said_with_the_command_and_resume_is_followed_live(page, logged_in, lake):
    alice = logged_in("alice")
    ui.make_flow(alice, "to-cold", destination="cold")  # only the "idle" executor reaches cold

    page.goto("/flows/e2e/to-cold/")
    page.locator("#flow-executions").get_by_role("button", name="Run now").click()
    expect(page).to_have_url(re.compile(r"/executions/e2e/to-cold/\d+/$"))
    notice = page.locator('[data-test="no-worker"]')
    expect(notice).to_contain_text(f"No worker consumes queue {IDLE_QUEUE}", timeout=15_000)
    expect(notice).to_contain_text("e2e.to-cold")
    expect(notice.locator("pre.command")).to_have_text(worker_command(IDLE_QUEUE))
    expect(page.locator("#execution-status h2 .badge").first).to_have_text("COMPILED")  # jobs sent
    ui.screenshot(page, "execution-no-worker")

    # Kill it, then Resume: the page keeps polling and shows each new state by itself.
    page.locator("#kill-confirm summary").click()
    page.locator("#kill-confirm").get_by_role("button", name="Kill").click()
    same_page = ui.SameDocument.mark(page)
    expect(page.locator("#execution-status h2 .badge").first).to_have_text("CANCELLED", timeout=30_000)
    expect(notice).to_have_count(0)
    assert same_page.swaps() >= 1

    page.get_by_role("button", name="Resume").click()
    same_page = ui.SameDocument.mark(page)
    expect(page.locator("#execution-status h2 .badge").first).to_have_text("RUNNING", timeout=30_000)
    expect(notice).to_contain_text(f"No worker consumes queue {IDLE_QUEUE}", timeout=15_000)
    assert same_page.swaps() >= 1
    execution = FlowExecution.objects.get(flow_name="to-cold")
    assert execution.jobs.get().status == "ORCHESTRATED"

    # The executor's health says the same, with the same command.
    page.goto("/topology/executors/idle/")
    health = page.locator("section.card", has=page.locator("h2", has_text="Health"))
    expect(health).to_contain_text(f"No worker has consumed {IDLE_QUEUE} yet", timeout=15_000)
    expect(health).to_contain_text(worker_command(IDLE_QUEUE))
