"""Actions that stay put: a page that refreshes itself every 2 s never replaces what the user
is working with. The Kill confirmation of a running execution stays open, with the focus
where it was, through several refreshes, and a keyboard alone can Kill; disabling an executor
says how many flows go to pending and asks, and Cancel leaves it enabled. At a desktop and a
phone width."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from portal.flows.models import FlowConfig
from portal.orchestration.models import FlowExecution
from portal.orchestration.services import run_now
from portal.topology.models import SpecExecutor
from tests.e2e import ui
from tests.integration.stack import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = {"desktop": (1280, 900), "phone": (375, 812)}
LONGER_THAN_TWO_REFRESHES_MS = 5_500


def live_execution(owner) -> FlowExecution:
    """An execution that stays unfinished: its only job goes to the "idle" executor, whose
    queue no worker consumes, so its page keeps refreshing itself."""
    flow = ui.make_flow(owner, "to-cold", destination="cold")
    return run_now(flow, user=owner)


def open_live_page(page: Page, execution: FlowExecution) -> ui.SameDocument:
    page.goto(f"/executions/e2e/to-cold/{execution.execution_id}/")
    expect(page.locator("#execution-status .live")).to_be_visible()
    same_page = ui.SameDocument.mark(page)
    page.wait_for_function("() => window.__e2eSwaps >= 1", timeout=10_000)  # it does refresh
    ui.htmx_idle(page)
    return same_page


def remember_focus(page: Page) -> None:
    page.evaluate("() => { window.__e2eFocused = document.activeElement; }")


def focus_kept(page: Page) -> bool:
    """The element focused when remembered is still in the page and still focused."""
    return page.evaluate(
        "() => window.__e2eFocused.isConnected && document.activeElement === window.__e2eFocused"
    )


def focused_text(page: Page) -> str:
    return page.evaluate("() => (document.activeElement.innerText || '').trim()")


def assert_accessible(page: Page, axe_source: str) -> None:
    serious = [v for v in ui.run_axe(page, axe_source) if v["impact"] in ui.SERIOUS]
    assert not serious, ui.describe_violations(serious)
    width = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], f"the page is {width[0]}px wide in a {width[1]}px window"


def tab_to(page: Page, text: str, limit: int = 60) -> None:
    """Press Tab until the focused control reads `text`, as a keyboard user would."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if focused_text(page) == text:
            return
    raise AssertionError(f"{limit} Tabs never reached {text!r}")


@pytest.mark.parametrize("width", WIDTHS, ids=list(WIDTHS))
def test_the_kill_confirmation_stays_open_with_its_focus_while_the_page_refreshes(
    page, logged_in, lake, width, axe_source
):
    alice = logged_in("alice")
    w, h = WIDTHS[width]
    page.set_viewport_size({"width": w, "height": h})
    execution = live_execution(alice)
    same_page = open_live_page(page, execution)

    confirm = page.locator("#kill-confirm")
    confirm.get_by_text("Kill…").click()
    kill = confirm.get_by_role("button", name="Kill", exact=True)
    expect(kill).to_be_visible()
    kill.focus()
    remember_focus(page)
    swaps = same_page.swaps()
    page.wait_for_timeout(LONGER_THAN_TWO_REFRESHES_MS)
    expect(confirm).to_have_attribute("open", "")
    expect(kill).to_be_visible()
    assert focus_kept(page), "the refresh took the focus away from the Kill button"
    assert same_page.swaps() == swaps  # nothing was replaced under the open confirmation
    expect(page.locator("#execution-status .live")).to_contain_text("paused")
    ui.screenshot(page, f"actions-kill-confirm-open-{w}")
    assert_accessible(page, axe_source)

    # Closed again by its Cancel button, the page refreshes again, and the focus goes back to the
    # control that opened it.
    confirm.get_by_role("button", name="Cancel").click()
    expect(confirm).not_to_have_attribute("open", "")
    remember_focus(page)
    page.wait_for_function(f"() => window.__e2eSwaps > {swaps}", timeout=10_000)
    ui.htmx_idle(page)
    assert page.evaluate("() => document.activeElement.id") == "kill-open"
    # No empty box is left behind by a confirmation a refresh closed.
    assert (
        page.evaluate(
            """() => [...document.querySelectorAll('#execution-status .actions > *')]
                 .filter(e => e.getBoundingClientRect().height > 0 && !e.innerText.trim()).length"""
        )
        == 0
    )
    assert FlowExecution.objects.get(pk=execution.pk).cancel_requested is False


@pytest.mark.parametrize("width", WIDTHS, ids=list(WIDTHS))
def test_a_running_execution_is_killed_with_the_keyboard_alone(page, logged_in, lake, width):
    alice = logged_in("alice")
    w, h = WIDTHS[width]
    page.set_viewport_size({"width": w, "height": h})
    execution = live_execution(alice)
    open_live_page(page, execution)

    tab_to(page, "Kill…")
    page.keyboard.press("Enter")
    expect(page.locator("#kill-confirm")).to_have_attribute("open", "")
    page.keyboard.press("Tab")
    assert focused_text(page) == "Kill"
    page.wait_for_timeout(2_500)  # a refresh comes due while the finger is on Enter
    assert focused_text(page) == "Kill"
    page.keyboard.press("Enter")

    expect(page.locator(".messages")).to_contain_text(f"Kill of execution {execution.execution_id} requested")
    expect(page.locator("#execution-status h2 .badge").first).to_have_text("CANCELLED", timeout=30_000)
    ui.screenshot(page, f"actions-kill-by-keyboard-{w}")
    assert FlowExecution.objects.get(pk=execution.pk).status == "CANCELLED"


@pytest.mark.parametrize("width", WIDTHS, ids=list(WIDTHS))
def test_disabling_an_executor_says_how_many_flows_go_to_pending_and_asks(
    page, logged_in, lake, width, axe_source
):
    dana = logged_in("dana")  # staff
    w, h = WIDTHS[width]
    page.set_viewport_size({"width": w, "height": h})
    for name in ("daily", "hourly"):  # landing → lake: both routed through "ingest"
        ui.make_flow(dana, name)
    ui.make_flow(dana, "to-cold", destination="cold")  # through "idle" only

    page.goto("/topology/executors/ingest/")
    page.get_by_role("link", name="Disable…").click()
    expect(page).to_have_url(re.compile(r"/topology/executors/ingest/disable/$"))
    expect(page.get_by_role("heading", name="Disable executor ingest?")).to_be_visible()
    expect(page.locator("#disable-impact")).to_contain_text("2 flows will go to pending")
    ui.screenshot(page, f"actions-disable-executor-asks-{w}")
    assert_accessible(page, axe_source)

    page.get_by_role("link", name="Cancel").click()
    expect(page).to_have_url(re.compile(r"/topology/executors/ingest/$"))
    expect(page.get_by_role("link", name="Disable…")).to_be_visible()
    assert SpecExecutor.objects.get(name="ingest").enabled is True
    assert set(FlowConfig.objects.values_list("compilation_status", flat=True)) == {"COMPILED"}

    # Confirmed, it is disabled, and the two flows it carried (no other executor reaches the
    # lake) go to pending; the flow through "idle" does not.
    page.get_by_role("link", name="Disable…").click()
    page.get_by_role("button", name="Disable ingest").click()
    expect(page.locator(".messages")).to_contain_text("Executor ingest disabled")
    assert SpecExecutor.objects.get(name="ingest").enabled is False

    def pending() -> set[str]:
        return set(
            FlowConfig.objects.filter(compilation_status="PENDING").values_list("flow_name", flat=True)
        )

    wait_until(
        lambda: pending() == {"daily", "hourly"}, 30, "the scheduler to recompile the flows", interval=0.5
    )
