"""A user granted a data node opens its page, tests the connection and sees
what it holds (Airbyte's "test the source" and schema discovery); a user
without a grant finds no such page."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from portal.topology import access
from portal.topology.models import DataNode
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_granted_user_tests_a_node_and_discovers_its_files(page, logged_in, lake):
    (lake / "landing" / "orders.csv").write_text("id,customer,updated_at\n1,ann,2026-01-01\n")
    (lake / "landing" / "events.jsonl").write_text(json.dumps({"id": 7, "score": 0.5}) + "\n")
    ghost = DataNode.objects.create(name="ghost", kind="files", properties={"path": str(lake / "gone")})
    alice = logged_in("alice")
    for name in ("landing", "ghost"):
        access.set_grants(DataNode.objects.get(name=name), [{"role": "read", "user": alice.username}])
    someone = get_user_model().objects.create_user("someone-else")
    access.set_grants(DataNode.objects.get(name="cold"), [{"role": "read", "user": someone.username}])

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
    expect(events.locator("tr", has_text="id")).to_contain_text("suitable")
    orders = page.locator("details[data-dataset='orders.csv']")
    orders.locator("summary").click()
    expect(orders.locator("tr", has_text="customer")).to_contain_text("string")
    ui.screenshot(page, "datanode-discovery")

    page.goto(f"/topology/datanodes/{ghost.name}/")
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#connection-verdict")).to_contain_text("Connection failed")
    expect(page.locator("#connection-verdict")).to_contain_text("No such file or directory")
    ui.screenshot(page, "datanode-test-failed")

    response = page.goto("/topology/datanodes/cold/")
    assert response is not None and response.status == 404
