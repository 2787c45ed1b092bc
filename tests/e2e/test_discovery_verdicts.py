"""A newcomer discovers what a database table and a Parquet file hold and reads, column by column,
which one a run can follow as its watermark: a money column keeps its precision and scale and is
no cursor, `updated_at` and the integer key are, and a Parquet file's timestamp is marked as
one although a files source follows the files' modification time. Every verdict says yes or no
first, in one wording. At a desktop and a phone width."""

from __future__ import annotations

import datetime as dt
import sqlite3

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from playwright.sync_api import expect

from portal.topology import grants
from portal.topology import services as topology
from portal.topology.models import DataNode
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = {"desktop": (1280, 900), "phone": (375, 812)}


def fits(page) -> bool:
    return page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


def verdicts(page, dataset: str) -> dict[str, tuple[str, str]]:
    """Each column of a discovered dataset as the page shows it: (type, "Watermark?" verdict)."""
    rows = page.locator(f"details[data-dataset='{dataset}'] tbody tr")
    expect(rows.first).to_be_visible()
    shown = {}
    for row in rows.all():
        cells = [
            row.locator(f"td[data-label='{label}']").inner_text().strip()
            for label in ("Column", "Type", "Watermark?")
        ]
        shown[cells[0]] = (cells[1], cells[2])
    return shown


def open_node(page, name: str) -> None:
    """From the newcomer's start page to the node's page, then Test connection and Discover."""
    page.goto("/monitoring/start/")
    page.locator("#step-source").get_by_role("link", name="Data nodes (sources & destinations)").click()
    page.locator("#usable-nodes").get_by_role("link", name=name, exact=True).click()
    expect(page.locator("h1")).to_have_text(f"Data node {name}")
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#connection-verdict")).to_contain_text("Connection works")
    page.get_by_role("button", name="Discover tables and files").click()
    expect(page.locator("#discovery-summary")).to_be_visible()


@pytest.mark.parametrize("width", WIDTHS, ids=list(WIDTHS))
def test_discovery_says_which_column_a_run_can_follow(page, logged_in, lake, width):
    page.set_viewport_size(dict(zip(("width", "height"), WIDTHS[width], strict=True)))
    with sqlite3.connect(lake / "shop.db") as db:
        db.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, amount NUMERIC(12,2), price REAL,"
            " created_at TIMESTAMP, updated_at TIMESTAMP, note TEXT)"
        )
    sold = pa.array([dt.datetime(2026, 1, 1, tzinfo=dt.UTC)], pa.timestamp("us", tz="UTC"))
    pq.write_table(
        pa.table({"id": [1], "amount": pa.array([None], pa.decimal128(12, 2)), "sold_at": sold}),
        lake / "landing" / "sales.parquet",
    )
    topology.create_data_node(
        {"name": "shop", "kind": "jdbc", "properties": {"url": f"jdbc:sqlite:{lake}/shop.db"}}
    )
    alice = logged_in("alice")
    for name in ("shop", "landing"):
        grants.set_grants(DataNode.objects.get(name=name), [{"role": "read", "user": alice.username}])

    open_node(page, "shop")
    assert verdicts(page, "orders") == {
        "id": ("INTEGER", "yes: integer primary key"),
        "amount": ("NUMERIC(12,2)", "no"),  # its precision and scale; money is no cursor
        "price": ("REAL", "no"),
        "created_at": ("TIMESTAMP", "yes: timestamp"),
        "updated_at": ("TIMESTAMP", "yes: timestamp"),
        "note": ("TEXT", "no"),
    }
    discovery = page.locator("#discovery")
    expect(discovery).not_to_contain_text("suitable")  # one wording: yes or no, and why
    expect(discovery).not_to_contain_text("candidate (")
    assert fits(page), "the discovered table scrolls sideways"
    ui.screenshot(page, f"discovery-verdicts-table-{width}")

    open_node(page, "landing")
    expect(page.locator("details[data-dataset='sales.parquet']")).to_contain_text(
        "Watermark: the file's modification time"
    )
    assert verdicts(page, "sales.parquet") == {
        "id": ("int64", "no"),
        "amount": ("decimal(12,2)", "no"),
        "sold_at": ("timestamp[us, tz=UTC]", "no: a timestamp; files follow their modification time"),
    }
    assert fits(page), "the discovered file scrolls sideways"
    ui.screenshot(page, f"discovery-verdicts-parquet-{width}")
