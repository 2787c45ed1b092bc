"""Status at a glance: on the flow list a user sees how each flow last ran (state, when, how long,
what it delivered), when it runs next and a strip of its recent runs, narrows the list to the
flows whose last run failed or that never ran, and follows a run by its readable name; on a
phone the same page fits the screen."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect

from portal.flows import services as flow_services
from portal.orchestration.models import ExecutionStatus, FlowExecution
from portal.orchestration.state import glance
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)

TICK = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
PATTERN = [ExecutionStatus.COMMITTED] * 3 + [ExecutionStatus.CANCELLED, ExecutionStatus.SKIPPED]


def nightly_history(flow, runs: int = 12) -> list[FlowExecution]:
    """A nightly flow's past: one finished run per night at 02:00, the last one failed."""
    statuses = [PATTERN[night % len(PATTERN)] for night in range(runs - 1)] + [ExecutionStatus.FAILED]
    executions = FlowExecution.objects.bulk_create(
        FlowExecution(
            flow=flow,
            flow_group=flow.flow_group,
            flow_name=flow.flow_name,
            execution_id=int((TICK + timedelta(days=night)).timestamp() * 1000),
            scheduled_at=TICK + timedelta(days=night),
            trigger=FlowExecution.Trigger.SCHEDULE,
            status=status,
            started_at=TICK + timedelta(days=night, seconds=5),
            ended_at=TICK + timedelta(days=night, minutes=4, seconds=5),
        )
        for night, status in enumerate(statuses)
    )
    glance.note_run(executions[-1])
    return executions


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], f"the page scrolls sideways: {width}"


def no_serious_violations(page: Page, axe_source: str) -> None:
    violations = [v for v in ui.run_axe(page, axe_source) if v["impact"] in ui.SERIOUS]
    assert not violations, ui.describe_violations(violations)


def row(page: Page, flow: str):
    return page.locator(f'#flow-table tbody tr[data-flow="e2e/{flow}"]')


def test_a_user_sees_how_each_flow_runs_filters_by_last_run_and_opens_a_run_by_its_name(
    page, logged_in, lake, axe_source
):
    dana = logged_in("dana")
    nightly = ui.make_flow(dana, "orders-daily")
    nightly = flow_services.update_flow(nightly, data={"schedule": "0 2 * * *"})
    history = nightly_history(nightly)
    ui.make_flow(dana, "fresh")
    ui.make_flow(dana, "live")

    # Dana runs one flow from its page, then finds it on the list with the others.
    page.goto("/flows/e2e/live/")
    page.locator("#flow-executions").get_by_role("button", name="Run now").click()
    expect(page.locator(".messages")).to_be_visible()
    page.goto("/flows/")

    # The nightly flow: its last run failed, ten runs in the strip, its next run tonight at 02:00.
    nightly_row = row(page, "orders-daily")
    expect(nightly_row.locator(".last-run .badge")).to_have_text("failed")
    expect(nightly_row.locator(".last-run a")).to_have_text(history[-1].display_name)
    expect(nightly_row.locator(".run-facts")).to_contain_text("took 4m")
    strip = nightly_row.locator(".run-strip .run")
    expect(strip).to_have_count(glance.STRIP_LENGTH)
    expect(strip.last).to_have_class(re.compile(r"\bfailed\b"))
    expect(strip.first).to_have_attribute("title", f"{history[2].display_name}: committed")
    expect(nightly_row.locator("td[data-label='Next run'] time")).to_have_text(re.compile(r", 02:00$"))
    expect(row(page, "fresh").locator(".last-run")).to_have_text("Never run")

    # The run Dana started: the list follows it in place, to how long it took and what it delivered.
    live = row(page, "live")
    marker = ui.SameDocument.mark(page)
    first_seen = live.locator(".last-run").inner_text()
    expect(live.locator(".last-run .badge")).to_have_text("committed", timeout=300_000)
    if "committed" not in first_seen:  # it was still on its way: the list followed it in place
        assert marker.swaps() >= 1
    expect(live.locator(".run-facts")).to_contain_text(
        re.compile(r"started .+ · took .+ · 5 records delivered")
    )
    run = FlowExecution.objects.get(flow_name="live")
    expect(live.locator(".last-run a")).to_have_text(run.display_name)
    expect(live.locator(".run-strip .run")).to_have_count(1)
    expect(live.locator("td[data-label='Next run']")).to_have_text("on demand")
    ui.screenshot(page, "status-at-a-glance-1280")
    no_serious_violations(page, axe_source)

    # Only the flows whose last run failed, then those that never ran; the list swaps in place.
    marker = ui.SameDocument.mark(page)
    page.get_by_label("Last run").select_option("FAILED")
    expect(page).to_have_url(re.compile(r"lastRun=FAILED"))
    expect(page.locator("#flow-table tbody tr")).to_have_count(1)
    expect(row(page, "orders-daily")).to_be_visible()
    page.get_by_label("Last run").select_option("NEVER")
    expect(page.locator("#flow-table tbody tr")).to_have_count(1)
    expect(row(page, "fresh")).to_be_visible()
    assert marker.swaps() >= 2
    ui.screenshot(page, "status-at-a-glance-never-run")
    page.get_by_label("Last run").select_option("COMMITTED")
    expect(row(page, "live")).to_be_visible()
    expect(row(page, "orders-daily")).to_have_count(0)

    # A square of the strip opens that run, named for people beside its id.
    page.get_by_label("Last run").select_option("")
    row(page, "orders-daily").locator(".run-strip .run").nth(3).click()
    opened = history[5]
    expect(page).to_have_url(re.compile(rf"/executions/e2e/orders-daily/{opened.execution_id}/$"))
    expect(page.locator("h1")).to_contain_text(opened.display_name)
    expect(page.locator("h1")).to_contain_text(f"execution {opened.execution_id}")
    assert opened.display_name == f"orders-daily · {opened.scheduled_at:%Y-%m-%d} 02:00"

    # The flow page lists its next runs, and its executions by name.
    page.goto("/flows/e2e/orders-daily/")
    expect(page.locator("#next-runs .next-run")).to_have_count(5)
    expect(page.locator("#next-runs .next-run").first).to_contain_text("02:00")
    expect(page.locator("#flow-executions tbody tr").first).to_contain_text(history[-1].display_name)

    # On a phone: the same list, one card per flow, nothing wider than the screen.
    page.set_viewport_size({"width": 375, "height": 812})
    page.goto("/flows/")
    nightly_row = row(page, "orders-daily")
    expect(nightly_row.locator(".run-strip .run")).to_have_count(glance.STRIP_LENGTH)
    box = nightly_row.locator(".run-strip").bounding_box()
    assert box is not None and box["x"] + box["width"] <= 375, box
    no_sideways_scroll(page)
    no_serious_violations(page, axe_source)
    ui.screenshot(page, "status-at-a-glance-375")
    page.goto(f"/executions/e2e/orders-daily/{history[-1].execution_id}/")
    expect(page.locator("h1")).to_contain_text(history[-1].display_name)
    no_sideways_scroll(page)
    ui.screenshot(page, "status-at-a-glance-execution-375")
