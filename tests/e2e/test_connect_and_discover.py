"""A user granted a data node opens its page, tests the connection and sees
what it holds (Airbyte's "test the source" and schema discovery); a user
without a grant sees whom to ask and a Request access button instead."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from portal.topology import grants
from portal.topology import services as topology
from portal.topology.models import DataNode
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_granted_user_tests_a_node_and_discovers_its_files(page, logged_in, lake):
    (lake / "landing" / "orders.csv").write_text("id,customer,updated_at\n1,ann,2026-01-01\n")
    (lake / "landing" / "events.jsonl").write_text(json.dumps({"id": 7, "score": 0.5}) + "\n")
    ghost = DataNode.objects.create(name="ghost", kind="files", properties={"path": str(lake / "gone")})
    alice = logged_in("alice")
    for name in ("landing", "ghost"):
        grants.set_grants(DataNode.objects.get(name=name), [{"role": "read", "user": alice.username}])
    someone = get_user_model().objects.create_user("someone-else")
    grants.set_grants(DataNode.objects.get(name="cold"), [{"role": "read", "user": someone.username}])

    page.goto("/topology/")
    page.get_by_role("link", name="landing", exact=True).click()
    expect(page.locator("h1")).to_have_text("Data node landing")
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#connection-verdict")).to_contain_text("Connection works")
    expect(page.locator("#connection-verdict")).to_contain_text("exists and is readable (2 entries)")
    page.get_by_role("button", name="Discover tables and files").click()
    expect(page.locator("#discovery-summary")).to_contain_text("2 data file(s)")
    events = page.locator("details[data-dataset='events.jsonl']")  # the first one, open
    expect(events.locator("tr", has_text="id")).to_contain_text("bigint")
    expect(events.locator("tr", has_text="score")).to_contain_text("double")
    expect(events).to_contain_text("Watermark: the file's modification time")
    orders = page.locator("details[data-dataset='orders.csv']")
    orders.locator("summary").click()
    expect(orders.locator("tr", has_text="customer")).to_contain_text("string")
    expect(orders.locator("tr", has_text="updated_at")).to_contain_text("date")  # typed from a sample
    ui.screenshot(page, "datanode-discovery")

    page.goto(f"/topology/datanodes/{ghost.name}/")
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#connection-verdict")).to_contain_text("Connection failed")
    expect(page.locator("#connection-verdict")).to_contain_text("No such file or directory")
    ui.screenshot(page, "datanode-test-failed")

    response = page.goto("/topology/datanodes/cold/")
    assert response is not None and response.status == 200
    expect(page.get_by_role("button", name="Request access")).to_be_visible()
    expect(page.get_by_role("button", name="Test connection")).to_have_count(0)


def test_a_user_picks_a_table_its_columns_and_watermark_on_the_flow_form(page, logged_in, lake):
    with sqlite3.connect(lake / "shop.db") as db:
        db.execute("CREATE TABLE items (sku TEXT PRIMARY KEY, stock INTEGER, changed TIMESTAMP, note TEXT)")
    topology.create_data_node(
        {
            "name": "shop",
            "kind": "jdbc",
            "description": "The shop",
            "properties": {"url": f"jdbc:sqlite:{lake}/shop.db"},
        }
    )
    logged_in("alice")

    page.goto("/flows/new/")
    page.locator("#id_flow_group").fill("e2e")
    page.locator("#id_flow_name").fill("picked")
    page.locator("#id_source").select_option("shop")
    page.locator("#id_destination-lake").check()
    page.get_by_role("button", name="Pick a table and columns from the source…").click()
    ui.htmx_idle(page)
    page.get_by_label("Table", exact=True).select_option("items")
    expect(page.get_by_label("Watermark column")).to_be_visible()
    watermark_options = page.locator("#id_pick_watermark option")
    expect(watermark_options).to_have_text(  # the candidates only: a plain integer is no cursor
        ["— none: read the whole table each run —", "changed (TIMESTAMP; timestamp)"]
    )
    expect(page.get_by_label("Watermark column")).to_have_value("changed")  # the best, by default
    keys = page.locator("#pick-primary-key")
    expect(keys.get_by_label("sku")).to_be_checked()  # the table's primary key, from the catalog
    expect(keys.get_by_label("stock")).not_to_be_checked()
    page.get_by_role("checkbox", name="note TEXT").uncheck()  # a column left out
    page.get_by_label("Watermark column").select_option("changed")
    ui.screenshot(page, "flow-form-source-picker")
    page.locator("#save-flow").click()

    expect(page).to_have_url(re.compile(r"/flows/e2e/picked/$"))
    properties = page.locator("section", has_text="Properties")
    expect(properties.locator("tr", has_text="source.jdbc.tables")).to_contain_text("items")
    expect(properties.locator("tr", has_text="extract.delta.fields")).to_contain_text("changed")
    expect(properties.locator("tr", has_text="columns.drop")).to_contain_text("note")
    expect(properties.locator("tr", has_text="extract.primary.key.fields")).to_contain_text("sku")


def test_staff_fill_in_a_node_by_its_kinds_fields_and_test_it(page, logged_in, lake):
    with sqlite3.connect(lake / "stock.db") as db:
        db.execute("CREATE TABLE stock (sku TEXT, level INTEGER)")
    logged_in("dana")  # staff
    page.goto("/topology/datanodes/new/")
    expect(page.get_by_label("Root folder")).to_be_visible()
    same_page = ui.SameDocument.mark(page)
    page.get_by_label("Name").fill("stock")
    page.get_by_label("Kind").select_option("jdbc")
    expect(page.get_by_label("JDBC URL")).to_be_visible()
    expect(page.get_by_label("Root folder")).to_have_count(0)
    expect(page.get_by_label("Name")).to_have_value("stock")
    assert same_page.swaps() >= 1
    expect(page.locator("#node-fields")).to_contain_text("Sets source.jdbc.url, writer.jdbc.url.")
    page.get_by_label("JDBC URL").fill(f"jdbc:sqlite:{lake}/stock.db")
    ui.screenshot(page, "datanode-form-jdbc")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".messages")).to_contain_text("stock saved")

    page.goto("/topology/datanodes/stock/")
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#connection-verdict")).to_contain_text("Connection works")
    page.get_by_role("button", name="Discover tables and files").click()
    expect(page.locator("details[data-dataset='stock']")).to_contain_text("level")
    assert DataNode.objects.get(name="stock").properties == {"url": f"jdbc:sqlite:{lake}/stock.db"}
