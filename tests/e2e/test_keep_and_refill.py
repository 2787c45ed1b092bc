"""A user keeps a CSV drop in the lake by key: on the flow form they pick the folder, hash the
e-mail column, tick the key and choose merge; the run leaves out the one record it cannot read, and
the execution page counts it and hands it over as a download. Then the Backfill page says what a
backfill of the folder would replace before it runs, and running it leaves one row per key."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from playwright.sync_api import expect

from portal.flows.models import FlowConfig
from portal.keys import services as keys
from tests.e2e import ui
from tests.integration.stack import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
RUN_SECONDS = 420  # a run of four rows takes ~1 min; a machine shared with other suites, minutes

HEADER = "id,email,amount"
ROWS = ["1,ann@example.org,10.5", "2,bob@example.org,20.0", "3,cid@example.org", "4,dan@example.org,40.0"]


def _lake_rows(folder) -> list[dict]:
    files = [p for p in sorted(folder.rglob("*.parquet")) if "_errors" not in p.parts]
    return sorted((row for f in files for row in pq.read_table(f).to_pylist()), key=lambda r: r["id"])


def test_merge_by_key_a_hashed_column_bad_rows_counted_and_downloaded_and_a_backfill_previewed(
    page, logged_in, lake
):
    (lake / "landing" / "orders").mkdir()
    (lake / "landing" / "orders" / "a.csv").write_text("\n".join([HEADER, *ROWS]) + "\n")
    alice = logged_in("alice")
    keys.wrap_customer_key(user=alice, generate=True, label="alice's key")  # hash salts derive from it

    page.goto("/flows/new/")
    page.locator("#id_flow_group").fill("e2e")
    page.locator("#id_flow_name").fill("keep")
    page.locator("#id_source").select_option("landing")
    page.locator("#id_destination-lake").check()
    page.get_by_role("button", name=re.compile("from the source")).click()
    ui.htmx_idle(page)
    page.get_by_label("Folder (dataset)").select_option("orders")
    ui.htmx_idle(page)
    page.get_by_label("Rule for email").select_option("hash")
    page.locator("#pick-primary-key").get_by_label("id").check()
    page.get_by_label("Write mode").select_option("merge")
    page.get_by_label("Bad records allowed, as a count").fill("1")
    ui.screenshot(page, "keep-flow-form")
    page.locator("#save-flow").click()

    expect(page).to_have_url(re.compile(r"/flows/e2e/keep/$"))
    flow = FlowConfig.objects.get(flow_group="e2e", flow_name="keep")
    assert flow.properties["writer.write.mode"] == "merge"
    assert flow.properties["extract.primary.key.fields"] == "id"
    assert flow.properties["columns.hash"] == "email" and "encrypt.wrapped.key" in flow.properties
    assert flow.properties["errors.max.count"] == "1"
    wait_until(lambda: flow.executions.exists(), 30, "the run made on save", interval=0.3)
    execution = ui.finished(flow.executions.get(), timeout=RUN_SECONDS)
    assert execution.status == "COMMITTED", execution.message

    published = _lake_rows(lake / "lake")
    assert [r["id"] for r in published] == [1, 2, 4]  # the short record is left out
    assert all(re.fullmatch(r"[0-9a-f]{64}", r["email"]) for r in published)
    assert hashlib.sha256(b"ann@example.org").hexdigest() != published[0]["email"]  # salted

    page.goto(f"/executions/e2e/keep/{execution.execution_id}/")
    bad = page.locator("[data-test='bad-records']")
    expect(bad).to_contain_text("1 set aside")
    with page.expect_download() as download:
        bad.get_by_role("link", name=re.compile("download them")).click()
    lines = [json.loads(line) for line in Path(download.value.path()).read_text().splitlines()]
    assert [(r["record"], r["reason"], r["line"]) for r in lines] == [
        ("3,cid@example.org", "2 field(s), expected 3", 4)
    ]
    assert lines[0]["execution_id"] == execution.execution_id
    ui.screenshot(page, "keep-execution-bad-records")

    page.goto("/executions/e2e/keep/backfill/")
    page.get_by_role("link", name=re.compile("Backfill this")).first.click()
    page.get_by_role("button", name="Show what it replaces").click()
    preview = page.locator("#backfill-preview")
    expect(preview).to_contain_text("What this backfill replaces")
    expect(preview).to_contain_text("merged by key: the rows read again replace their stored versions")
    ui.screenshot(page, "keep-backfill-preview")
    before = flow.executions.count()
    page.get_by_role("button", name="Start backfill").click()
    expect(page.locator(".messages")).to_contain_text("Backfill execution")
    refill = flow.executions.order_by("-execution_id").first()
    assert flow.executions.count() == before + 1 and refill.trigger == "BACKFILL"
    assert ui.finished(refill, timeout=RUN_SECONDS).status == "COMMITTED", refill.message
    assert [r["id"] for r in _lake_rows(lake / "lake")] == [1, 2, 4]  # replaced by key, not added
