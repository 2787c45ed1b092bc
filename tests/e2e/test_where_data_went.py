"""Where did my data go? A user runs their flow from its page, opens the execution, reads where
each dataset went (the folder inside the node, its files and records; never the server's own
path) and opens a preview of its first rows, without leaving the browser. At a desktop and a
phone width."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from portal.orchestration.models import FlowExecution
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = {"desktop": (1280, 900), "phone": (375, 812)}


def fits(page) -> bool:
    return page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.parametrize("width", WIDTHS, ids=list(WIDTHS))
def test_run_open_the_execution_see_where_the_data_went_and_preview_it(
    page, logged_in, lake, axe_source, width
):
    page.set_viewport_size(dict(zip(("width", "height"), WIDTHS[width], strict=True)))
    alice = logged_in("alice")
    ui.make_flow(alice, "numbers-copy", **{"numbers.per.run": "25"})

    page.goto("/flows/e2e/numbers-copy/")
    page.locator("#flow-executions").get_by_role("button", name="Run now").click()
    expect(page).to_have_url(re.compile(r"/executions/e2e/numbers-copy/\d+/$"))
    expect(page.locator("#execution-status h2 .badge").first).to_have_text("COMMITTED", timeout=120_000)

    went = page.locator('[data-test="outputs"]')
    expect(went.get_by_role("heading", name="Where the data went")).to_be_visible()
    row = went.locator('[data-test="output"]')
    expect(row).to_have_count(1)
    expect(row.locator('[data-test="output-where"]')).to_contain_text(
        re.compile(r"folder e2e/numbers-copy/\S+")
    )
    expect(row).to_contain_text("lake")
    expect(row).to_contain_text(re.compile(r"\d+ json files?"))
    expect(row.locator('td[data-label="Records"]')).to_have_text("25")
    assert str(lake) not in page.content()  # alice is not staff: no server path
    assert fits(page), "the page scrolls sideways"
    serious = [v for v in ui.run_axe(page, axe_source) if v["impact"] in ui.SERIOUS]
    assert not serious, ui.describe_violations(serious)
    ui.screenshot(page, f"where-data-went-{width}")

    row.get_by_role("link", name=re.compile("Preview the first rows")).click()
    expect(page).to_have_url(re.compile(r"/jobs/e2e\.numbers-copy\.1-landing-to-lake/outputs/0/$"))
    rows = page.locator('[data-test="preview-rows"] tbody tr')
    expect(rows).to_have_count(20)  # 25 delivered, the first 20 shown
    expect(page.locator('[data-test="preview-rows"]')).to_contain_text("1")
    expect(page.locator('[data-test="preview-where"]')).to_contain_text("folder e2e/numbers-copy/")
    assert str(lake) not in page.content()
    assert fits(page), "the preview scrolls sideways"
    serious = [v for v in ui.run_axe(page, axe_source) if v["impact"] in ui.SERIOUS]
    assert not serious, ui.describe_violations(serious)
    ui.screenshot(page, f"dataset-preview-{width}")

    page.get_by_role("link", name="Back to the execution").click()
    execution = FlowExecution.objects.get(flow_name="numbers-copy")
    expect(page).to_have_url(re.compile(rf"/executions/e2e/numbers-copy/{execution.execution_id}/$"))
