"""The source picker on the flow form beyond a first pick: Edit shows a saved flow's picks again
(table, kept columns, watermark, key) instead of raw property rows, and a files node offers the
outputs of the flows publishing into it, each read alone by the downstream flow."""

from __future__ import annotations

import sqlite3

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.contrib.auth.models import AnonymousUser

from portal.topology import picker, services
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(tmp_path):
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, ssn TEXT, updated_at TIMESTAMP)")
    return services.create_data_node(
        {"name": "shop", "kind": "jdbc", "properties": {"url": f"jdbc:sqlite:{path}"}}
    )


def test_edit_shows_the_saved_picks_not_their_properties(browser, owner, shop):
    properties = {
        "source.jdbc.tables": "orders",
        "extract.delta.fields": "updated_at",
        "extract.primary.key.fields": "id",
        "columns.drop": "ssn",
    }
    flow = FlowConfigFactory(
        owner=owner,
        flow_group="shop",
        flow_name="orders",
        source="shop",
        destinations=[],
        properties=properties,
    )
    page = browser.get(f"/flows/{flow.flow_group}/{flow.flow_name}/edit/").content.decode()

    assert '<option value="orders" selected>orders</option>' in page
    assert 'name="pick_columns" value="ssn" id="id_pick_column-2">' in page  # left out, as saved
    assert 'name="pick_columns" value="updated_at" id="id_pick_column-3" checked>' in page
    assert '<option value="updated_at" selected>' in page
    assert 'name="pick_primary_key" value="id" id="id_pick_primary_key-1" checked>' in page
    assert 'name="primary_key" value="id"' in page  # the box: the same key
    for key in ("source.jdbc.tables", "extract.delta.fields", "columns.drop"):
        assert f'value="{key}"' not in page  # not a property row besides the picker


@pytest.fixture
def lake(tmp_path, owner):
    root = tmp_path / "lake"
    node = services.create_data_node({"name": "lake", "kind": "files", "properties": {"path": str(root)}})
    for flow, columns in (("orders", ["id", "total"]), ("stock", ["sku", "level"])):
        folder = root / "sales" / flow / flow
        folder.mkdir(parents=True)
        pq.write_table(pa.table({name: [1] for name in columns}), folder / "part-00000.snappy.parquet")
        FlowConfigFactory(owner=owner, flow_group="sales", flow_name=flow, destinations=["lake"])
    FlowConfigFactory(owner=owner, flow_group="sales", flow_name="quiet", destinations=["lake"])  # no output
    return node


def test_a_files_node_offers_each_upstream_flows_own_output(owner, lake):
    found = picker.choices(owner, "lake")

    assert [(p.name, p.upstream, p.format) for p in found.pickables] == [
        ("sales/orders", "sales/orders", "parquet"),
        ("sales/stock", "sales/stock", "parquet"),
        ("sales", "", "parquet"),  # the group's folder: every flow's output mixed
    ]
    assert [c.name for c in found.find("sales/stock").columns] == ["sku", "level"]
    assert "the output of 2 upstream flow(s)" in found.message

    posted = {"pick_dataset": "sales/orders", "pick_format": "parquet"}
    assert picker.picked_properties(posted, "files") == {
        "source.files.folder": "sales/orders",  # the downstream flow reads that flow's output only
        "source.files.format": "parquet",
    }
    assert picker.upstream_outputs(AnonymousUser(), lake) == []  # only flows one may see


def test_the_picker_page_names_the_upstream_flow(browser, lake):
    page = browser.post("/topology/source-picker/", {"source": "lake", "pick_dataset": "sales/stock"})
    html = page.content.decode()
    assert '<optgroup label="Upstream flows&#x27; output (each reads only that flow&#x27;s)">' in html
    assert '<option value="sales/stock" selected>flow sales/stock</option>' in html
    assert "Reads only the output of flow <strong>sales/stock</strong>" in html
