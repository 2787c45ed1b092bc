"""A newcomer picks a table on the flow form and finds the sensible choices made: the watermark
is the timestamp that moves on every change, the picker's key ticks and the Primary key box are
one key; Edit shows the picker as it was left; and a files node offers an upstream flow's own
output to chain on. At a desktop and a phone width."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from playwright.sync_api import expect

from portal.flows.models import FlowConfig
from portal.topology import services as topology
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = {"desktop": (1280, 900), "phone": (375, 812)}


def fits(page) -> bool:
    return page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.parametrize("width", WIDTHS, ids=list(WIDTHS))
def test_pick_with_defaults_edit_again_and_chain_on_an_upstream_flow(page, logged_in, lake, width):
    page.set_viewport_size(dict(zip(("width", "height"), WIDTHS[width], strict=True)))
    with sqlite3.connect(lake / "shop.db") as db:
        db.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, amount NUMERIC(12,2), created_at TIMESTAMP,"
            " updated_at TIMESTAMP, note TEXT)"
        )
    topology.create_data_node(
        {"name": "shop", "kind": "jdbc", "properties": {"url": f"jdbc:sqlite:{lake}/shop.db"}}
    )
    alice = logged_in("alice")

    page.goto("/flows/new/")
    page.locator("#id_flow_group").fill("e2e")
    page.locator("#id_flow_name").fill("orders")
    page.locator("#id_source").select_option("shop")
    page.locator("#id_destination-lake").check()
    page.get_by_role("button", name="Pick a table and columns from the source…").click()
    ui.htmx_idle(page)
    page.get_by_label("Table", exact=True).select_option("orders")
    ui.htmx_idle(page)
    watermark = page.get_by_label("Watermark column")
    expect(watermark).to_have_value("updated_at")  # not "none", not created_at
    expect(watermark.locator("option[value='amount']")).to_have_count(0)  # money is no cursor
    keys, box = page.locator("#pick-primary-key"), page.locator("#id_primary_key")
    expect(keys.get_by_label("id")).to_be_checked()
    expect(box).to_have_value("id")  # the tick and the box: one key
    keys.get_by_label("note").check()
    expect(box).to_have_value("id,note")
    box.fill("id")
    expect(keys.get_by_label("note")).not_to_be_checked()
    assert fits(page), "the form scrolls sideways"
    ui.screenshot(page, f"picker-defaults-{width}")
    page.locator("#save-flow").click()
    expect(page).to_have_url(re.compile(r"/flows/e2e/orders/$"))

    page.goto("/flows/e2e/orders/edit/")  # the picker as it was left, not raw properties
    expect(page.get_by_label("Table", exact=True)).to_have_value("orders")
    expect(page.get_by_label("Watermark column")).to_have_value("updated_at")
    expect(page.locator("#pick-primary-key").get_by_label("id")).to_be_checked()
    expect(page.locator("#id_primary_key")).to_have_value("id")
    expect(page.locator("#prop-rows input[value='source.jdbc.tables']")).to_have_count(0)
    assert fits(page), "the edit form scrolls sideways"
    ui.screenshot(page, f"picker-edit-{width}")
    saved = FlowConfig.objects.get(flow_name="orders").properties
    page.locator("#save-flow").click()  # saved again untouched: the same properties, none twice
    expect(page).to_have_url(re.compile(r"/flows/e2e/orders/$"))
    assert FlowConfig.objects.get(flow_name="orders").properties == saved
    assert saved["extract.delta.fields"] == "updated_at" and saved["extract.primary.key.fields"] == "id"

    ui.make_flow(alice, "upstream")  # publishes into lake, under e2e/upstream
    output = lake / "lake" / "e2e" / "upstream" / "numbers"
    output.mkdir(parents=True)
    (output / "part-00000.json").write_text(json.dumps({"n": 1}) + "\n")
    page.goto("/flows/new/")
    page.locator("#id_source").select_option("lake")
    page.get_by_role("button", name="Pick a table and columns from the source…").click()
    ui.htmx_idle(page)
    page.get_by_label("Folder (dataset)").select_option(label="flow e2e/upstream")
    ui.htmx_idle(page)
    expect(page.locator("#picker-upstream")).to_contain_text("Reads only the output of flow e2e/upstream")
    expect(page.locator("#source-picker")).to_contain_text("n")
    assert fits(page), "the chaining picker scrolls sideways"
    ui.screenshot(page, f"picker-chaining-{width}")
