"""Deleting a flow that feeds another says so before it happens: Alice chains two flows, runs the
first, and on its Delete page reads which flow starts on its commits and that its watermarks go
with it; Cancel keeps it, Delete removes it and the other flow stops waiting for it. At a desktop
and a phone width."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from portal.flows.models import FlowConfig
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = {"desktop": (1280, 900), "phone": (375, 812)}


@pytest.mark.parametrize("width", WIDTHS, ids=list(WIDTHS))
def test_the_delete_page_names_the_downstream_flow_and_the_watermarks(
    page, logged_in, lake, axe_source, width
):
    page.set_viewport_size(dict(zip(("width", "height"), WIDTHS[width], strict=True)))
    alice = logged_in("alice")
    ui.make_flow(alice, "numbers")
    ui.make_flow(alice, "numbers-report")

    page.goto("/flows/e2e/numbers-report/triggers/")
    page.get_by_label("Upstream datasets").fill("e2e/numbers")
    page.get_by_role("button", name="Save triggers").click()
    expect(page).to_have_url(re.compile(r"/flows/e2e/numbers-report/$"))

    page.goto("/flows/e2e/numbers/")
    page.locator("#flow-executions").get_by_role("button", name="Run now").click()
    expect(page.locator("#execution-status h2 .badge").first).to_have_text("COMMITTED", timeout=120_000)

    page.goto("/flows/e2e/numbers/")
    page.get_by_role("link", name="Delete", exact=True).click()
    expect(page).to_have_url(re.compile(r"/flows/e2e/numbers/delete/$"))
    feeds = page.locator('[data-test="feeds-on-delete"]')
    expect(feeds).to_contain_text("1 flow downstream of this one")
    expect(feeds.locator('[data-test="downstream-flow"]')).to_have_text(
        "e2e/numbers-report starts when it commits"
    )
    state = page.locator('[data-test="state-on-delete"]')
    expect(state).to_contain_text("Its watermarks go with it")
    expect(state).to_contain_text("numbers")
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    serious = [v for v in ui.run_axe(page, axe_source) if v["impact"] in ui.SERIOUS]
    assert not serious, ui.describe_violations(serious)
    ui.screenshot(page, f"delete-downstream-{width}")

    page.get_by_role("link", name="Cancel").click()
    expect(page).to_have_url(re.compile(r"/flows/e2e/numbers/$"))
    assert FlowConfig.objects.filter(flow_name="numbers").exists()

    page.get_by_role("link", name="Delete", exact=True).click()
    page.get_by_role("button", name="Delete flow").click()
    expect(page.locator("ul.messages")).to_contain_text("Flow e2e/numbers deleted.")
    page.goto("/flows/e2e/numbers-report/")
    expect(page.locator('[data-test="runs-when"]')).to_have_count(0)
