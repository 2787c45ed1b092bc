"""A user about to backfill two hours of a files flow learns, before starting it, the range it
really reads and about how many rows: the two hours fall inside one hourly load of 990 rows, which
an appending files destination replaces whole, so the preview says so — not a bare "2 hours". A
replay of the first load reads "from the first record", never Python's ``None``; at 1280 and
375 px, reached from the flows list as a newcomer would."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect

from portal.orchestration.models import DatasetState, DatasetStateHistory, FlowExecution, JobExecution
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 12, 4, tzinfo=UTC)
JOB = "e2e.orders.1-landing-to-lake"


def files_mark(
    at: datetime, name: str = "part-00001-3f2a9c1e-7b7d-4e2a-9a51-0c3b2f1d8e44.snappy.parquet"
) -> str:
    """A files source's stored watermark: the newest file's time in ms and its name."""
    return f"{int(at.timestamp() * 1000):015d}:{name}"


def hourly_loads(flow) -> str:
    """Three loads of the flow's `orders`: up to 01:00 (10 rows), 03:00 (990), 05:00 (5)."""
    state = DatasetState.objects.create(
        flow_id=flow.pk, flow_group="e2e", flow_name=flow.flow_name, job_name=JOB, dataset_urn="orders"
    )
    previous = ""
    for hour, rows in ((1, 10), (3, 990), (5, 5)):
        mark = files_mark(T0 + timedelta(hours=hour))
        DatasetStateHistory.objects.create(
            state=state, previous_watermark=previous, watermark=mark, status="COMMITTED", records=rows
        )
        previous = mark
    DatasetState.objects.filter(pk=state.pk).update(watermark=previous)
    return previous


def a_replay_of_the_first_load(flow) -> FlowExecution:
    """What "Run this again, reading again exactly what it loaded" made of the first load."""
    first = files_mark(T0 + timedelta(hours=1))
    execution = FlowExecution.objects.create(
        flow=flow,
        flow_group="e2e",
        flow_name=flow.flow_name,
        execution_id=int((T0 + timedelta(hours=6)).timestamp() * 1000),
        trigger=FlowExecution.Trigger.BACKFILL,
        status="COMMITTED",
        started_at=T0 + timedelta(hours=6),
        ended_at=T0 + timedelta(hours=6, minutes=1),
        backfill={"orders": {"low": None, "high": first}},
    )
    JobExecution.objects.create(
        execution=execution,
        job_name=JOB,
        job_group="e2e",
        executor="ingest",
        queue="e2e.ingest",
        status="COMMITTED",
        attempt=1,
        worker="worker-a",
        processed_count=10,
        started_at=T0 + timedelta(hours=6),
        ended_at=T0 + timedelta(hours=6, minutes=1),
        high_watermark=first,
    )
    return execution


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], f"the page scrolls sideways: {width}"


def preview_two_hours(page: Page) -> None:
    """From the flows list: the flow, Backfill…, the dataset's "Backfill this", a two-hour window."""
    page.goto("/flows/")
    page.locator('tr[data-flow="e2e/orders"]').get_by_role("link", name="e2e/orders").click()
    page.get_by_role("link", name="Backfill…").click()
    expect(page).to_have_url(re.compile(r"/executions/e2e/orders/backfill/$"))
    page.get_by_role("link", name=re.compile(r"^Backfill this")).click()
    expect(page.get_by_label("Dataset URN")).to_have_value("orders")
    page.get_by_label("Low watermark").fill("2026-12-04T02:00:00Z")
    page.get_by_label("High watermark").fill("2026-12-04T02:30:00Z")
    page.get_by_role("button", name="Show what it replaces").click()


def test_a_backfill_preview_says_the_range_it_reads_and_its_rows_and_a_replay_has_no_none(
    page, logged_in, lake, axe_source
):
    alice = logged_in("alice")
    flow = ui.make_flow(alice, "orders")
    hourly_loads(flow)
    replay = a_replay_of_the_first_load(flow)

    preview_two_hours(page)
    estimate = page.locator('[data-test="backfill-estimate"]')
    expect(estimate).to_be_visible()
    expect(page.locator('[data-test="backfill-range"]')).to_contain_text(
        "after 2026-12-04T02:00:00Z, up to and including 2026-12-04T02:30:00Z"
    )
    # The window cuts through the load from 01:00 to 03:00, which the files destination replaces whole.
    expect(page.locator('[data-test="backfill-whole-loads"]')).to_contain_text("2026-12-04T01:00:00Z")
    expect(page.locator('[data-test="backfill-whole-loads"]')).to_contain_text("2026-12-04T03:00:00Z")
    expect(page.locator('[data-test="backfill-rows"]')).to_contain_text("up to 990")
    expect(page.locator("main")).not_to_contain_text("None")
    # The stored watermark reads as a time and a short file name, not <ms>:<path>.
    expect(page.locator("main")).to_contain_text("2026-12-04 05:00:00 UTC, part-00001-")
    expect(page.locator("main")).not_to_contain_text("001796349600000:")
    ui.screenshot(page, "backfill-preview-1280")
    violations = [v for v in ui.run_axe(page, axe_source) if v["impact"] in ui.SERIOUS]
    assert not violations, ui.describe_violations(violations)

    # The replay of the first load, from the flow page's executions.
    page.goto("/flows/e2e/orders/")
    page.locator("#flow-executions").get_by_role("link", name=re.compile(r"orders · ")).first.click()
    expect(page).to_have_url(re.compile(rf"/executions/e2e/orders/{replay.execution_id}/$"))
    expect(page.locator("main")).to_contain_text("from the first record, up to and including")
    expect(page.locator(f"#job-{JOB.replace('.', '')}")).to_contain_text("the first record →")
    expect(page.locator("main")).not_to_contain_text("None")
    ui.screenshot(page, "replay-1280")

    # On a phone: the preview and the replay fit the screen.
    page.set_viewport_size({"width": 375, "height": 812})
    no_sideways_scroll(page)
    ui.screenshot(page, "replay-375")
    preview_two_hours(page)
    expect(page.locator('[data-test="backfill-rows"]')).to_contain_text("up to 990")
    no_sideways_scroll(page)
    ui.screenshot(page, "backfill-preview-375")
