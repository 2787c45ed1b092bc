"""What a user coming from Airflow or Airbyte looks for: a flow's
on/off switch, a pack's versions side by side with the flows that use it,
and a menu that folds away on a phone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from portal.flows import services as flow_services
from portal.flows.models import FlowConfig
from portal.orchestration.services import run_now
from portal.templatepacks import services as packs
from tests.e2e import ui
from tests.integration.stack import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_owner_pauses_a_flow_and_sees_it_paused_everywhere_then_resumes_it(page, logged_in, lake):
    dana = logged_in("dana")
    flow = ui.make_flow(dana, "nightly", **{"flow.catchUpPolicy": "latest"})
    flow_services.update_flow(flow, data={"schedule": "0 3 * * *"})

    page.goto("/flows/e2e/nightly/")
    page.get_by_role("button", name="Pause schedule").click()
    expect(page.locator(".messages")).to_contain_text("paused: its schedule makes no executions")
    expect(page.locator("h1 .badge.paused")).to_have_text("Paused")
    expect(page.locator("#paused-note")).to_contain_text("catch-up policy latest")
    expect(page.locator("#flow-executions h2 .badge.paused")).to_be_visible()
    assert FlowConfig.objects.get(pk=flow.pk).paused
    ui.screenshot(page, "flow-paused")

    page.goto("/flows/")
    page.get_by_label("Schedule").select_option("paused")
    row = page.locator("#flow-table tbody tr", has_text="e2e/nightly")
    expect(row.locator(".badge.paused")).to_be_visible()
    ui.screenshot(page, "flows-paused-filter")
    page.get_by_label("Schedule").select_option("active")
    expect(page.locator("#flow-table")).not_to_contain_text("e2e/nightly")

    page.goto("/flows/e2e/nightly/")
    page.get_by_role("button", name="Resume schedule").click()
    expect(page.locator(".messages")).to_contain_text("follow its catch-up policy (latest)")
    expect(page.locator("h1 .badge.paused")).to_have_count(0)
    assert not FlowConfig.objects.get(pk=flow.pk).paused


def test_a_reader_compares_two_pack_versions_and_finds_the_flows_using_the_pack(page, logged_in, lake):
    dana = logged_in("dana")
    pack = packs.create_pack(user=dana, name="habits-pack")
    for path, text in (
        ("ingest/a.template", "a = 1\nb = 2\n"),
        ("ingest/a.template", "a = 1\nb = 3\n"),
        ("ingest/c.template", "c = 1\n"),
    ):  # v1, v2, v3
        packs.save_template(pack, user=dana, path=path, text=text)
        pack.refresh_from_db()
    flow = ui.make_flow(dana, "uses-pack")
    flow_services.update_flow(flow, data={"template_uris": "pack://habits-pack/ingest/a.template"})

    page.goto("/packs/habits-pack/")
    page.get_by_label("From version").select_option("1")
    page.get_by_label("To version").select_option("3")
    page.get_by_role("button", name="Compare").click()
    expect(page).to_have_url(re.compile(r"/packs/habits-pack/compare/\?from=1&to=3$"))
    comparison = page.locator("#comparison")
    expect(comparison.locator("li", has_text="c.template")).to_contain_text("added")
    expect(comparison.locator("li", has_text="a.template")).to_contain_text("changed")
    ui.screenshot(page, "pack-compare")
    page.get_by_label("From version").select_option("2")
    page.get_by_label("To version").select_option("1")
    page.get_by_role("button", name="Compare").click()
    expect(comparison.locator(".diff-del")).to_have_text("-b = 3")
    expect(comparison.locator(".diff-add")).to_have_text("+b = 2")

    comparison.get_by_role("link", name="v1").click()
    expect(page.locator("h1")).to_contain_text("v1")
    expect(page.get_by_role("link", name="pack://habits-pack/ingest/c.template")).to_have_count(0)
    page.get_by_role("link", name="pack://habits-pack/ingest/a.template").click()
    expect(page.locator("pre.code")).to_contain_text("b = 2")
    ui.screenshot(page, "pack-version-template")

    page.goto("/packs/habits-pack/")
    page.get_by_role("link", name="Used by 1 flow").click()
    expect(page.locator("h1")).to_contain_text("Flows using habits-pack")
    page.get_by_role("link", name="e2e/uses-pack").click()
    expect(page).to_have_url(re.compile(r"/flows/e2e/uses-pack/$"))


def test_on_a_phone_the_menu_folds_behind_a_button(page, logged_in, lake):
    logged_in("dana")
    nav = page.get_by_role("navigation", name="Main")
    menu_button = page.get_by_role("button", name="Menu")
    # Desktop: the menu is there, no button.
    page.goto("/flows/")
    expect(nav).to_be_visible()
    expect(menu_button).to_be_hidden()

    page.set_viewport_size({"width": 375, "height": 812})
    page.goto("/flows/")
    expect(nav).to_be_hidden()
    expect(menu_button).to_have_attribute("aria-expanded", "false")
    ui.screenshot(page, "phone-menu-folded")
    menu_button.click()
    expect(menu_button).to_have_attribute("aria-expanded", "true")
    expect(nav).to_be_visible()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    ui.screenshot(page, "phone-menu-open")
    page.keyboard.press("Escape")
    expect(nav).to_be_hidden()
    expect(menu_button).to_be_focused()

    menu_button.click()
    nav.get_by_role("link", name="Template packs").click()
    expect(page).to_have_url(re.compile(r"/packs/$"))
    expect(nav).to_be_hidden()  # a new page starts folded
    width = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], f"the page scrolls sideways: {width}"


def test_a_user_downloads_searches_and_filters_an_attempts_log(page, logged_in, lake):
    dana = logged_in("dana")
    flow = ui.make_flow(dana, "logs")
    execution = ui.finished(run_now(flow, user=dana))
    assert execution.status == "COMMITTED", execution.message
    job = execution.jobs.get()
    page.goto(f"/executions/e2e/logs/{execution.execution_id}/jobs/{job.job_name}/log/")
    worker_log = page.locator(".log-section", has_text="Worker log")

    with page.expect_download() as info:
        worker_log.get_by_role("link", name=re.compile("Download worker log")).click()
    download = info.value
    assert download.suggested_filename == f"e2e-logs-{execution.execution_id}-{job.job_name}.1.log"
    text = Path(download.path()).read_text(encoding="utf-8")
    assert " INFO attempt 1 on " in text and "5 extracted" in text

    page.get_by_label("Search").fill("extracted")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#log-count-worker")).to_contain_text("1 of")
    expect(worker_log.locator("mark").first).to_have_text("extracted")
    ui.screenshot(page, "job-log-search")

    page.get_by_label("Search").fill("")
    page.get_by_label("Level").select_option("WARN")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#log-count-worker")).to_contain_text("0 of")  # a clean run: no warning
    driver_count = page.locator("#log-count-driver")
    expect(driver_count).to_be_visible()
    page.get_by_role("link", name="Clear").click()
    expect(worker_log.locator("pre.log-full")).to_contain_text("commit steps executed")


def test_an_owner_backfills_a_dataset_from_the_flow_page(page, logged_in, lake):
    dana = logged_in("dana")
    flow = ui.make_flow(dana, "refill")
    assert ui.finished(run_now(flow, user=dana)).status == "COMMITTED"
    page.goto("/flows/e2e/refill/")
    page.get_by_role("link", name="Backfill…").click()
    page.get_by_role("link", name=re.compile("Backfill this")).first.click()
    expect(page.get_by_label("Dataset URN")).not_to_have_value("")
    page.get_by_label("Low watermark").fill("0")
    page.get_by_label("High watermark").fill("3")
    ui.screenshot(page, "backfill-form")
    page.get_by_role("button", name="Start backfill").click()
    expect(page.locator(".messages")).to_contain_text("Backfill execution")
    execution = FlowConfig.objects.get(pk=flow.pk).executions.order_by("-execution_id").first()
    assert execution.trigger == "BACKFILL" and ui.finished(execution).status == "COMMITTED", execution.message


def test_a_running_jobs_log_is_followed_live_until_the_reader_stops_following(
    page, logged_in, lake, tmp_path
):
    dana = logged_in("dana")
    release = tmp_path / "release"
    flow = ui.make_flow(
        dana,
        "follow",
        **{"slow.seconds.per.row": "1", "slow.release.file": str(release), "numbers.per.run": "40"},
    )
    execution = run_now(flow, user=dana)
    wait_until(lambda: execution.jobs.filter(status="RUNNING").exists(), 60, "the job to start", interval=0.3)
    job = execution.jobs.get()
    page.set_viewport_size({"width": 1280, "height": 600})
    page.goto(f"/executions/e2e/follow/{execution.execution_id}/jobs/{job.job_name}/log/")
    follow = page.get_by_label("Follow (keep the end in view)")
    expect(follow).to_be_checked()
    driver = page.locator(".log-section", has_text="Spark driver log").locator("pre.log-full")
    # The driver log grows past its box while Spark works; followed, its end stays in view.
    page.wait_for_function(
        "() => { const p = document.querySelector('#job-log .log-section:nth-of-type(2) pre.log-full');"
        " return p && p.scrollHeight > p.clientHeight + 50; }",
        timeout=60_000,
    )
    # (waited for: a refresh may have just replaced the box, to be scrolled once it settles)
    page.wait_for_function(
        "() => { const p = document.querySelector('#job-log .log-section:nth-of-type(2) pre.log-full');"
        " return p.scrollTop > 0 && p.scrollTop + p.clientHeight >= p.scrollHeight - 2; }",
        timeout=5_000,
    )
    ui.screenshot(page, "job-log-follow")

    follow.uncheck()
    driver.evaluate("pre => { pre.scrollTop = 0; }")
    page.wait_for_timeout(4500)  # two refreshes
    assert driver.evaluate("pre => pre.scrollTop") == 0  # left where the reader put it
    release.touch()
    assert ui.finished(execution).status == "COMMITTED", execution.message
