"""Picking a table, its columns and its watermark column on the flow form
(htmx fragment from the topology app) instead of typing property names; the
picks are saved as the job properties they stand for."""

from __future__ import annotations

import sqlite3

import pytest

from portal.flows.models import FlowConfig
from portal.pipeline.usernode import FLOW_LOGIN_REFUSED
from portal.topology import services
from tests.builders.flows import without_template
from tests.factories import UserFactory
from tests.pg_server import scratch_database

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(tmp_path):
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE items (sku TEXT, stock INTEGER, changed TIMESTAMP, note TEXT)")
        db.execute("CREATE TABLE refunds (id INTEGER PRIMARY KEY, amount REAL)")
    return services.create_data_node(
        {"name": "shop", "kind": "jdbc", "properties": {"url": f"jdbc:sqlite:{path}"}}
    )


@pytest.fixture
def drop(tmp_path):
    root = tmp_path / "drop"
    (root / "orders").mkdir(parents=True)
    (root / "orders" / "a.csv").write_text("id,customer\n1,ann\n")
    (root / "loose.csv").write_text("x\n1\n")  # not in a folder: no dataset of its own
    return services.create_data_node({"name": "drop", "kind": "files", "properties": {"path": str(root)}})


def test_the_picker_offers_tables_then_columns_and_watermark_candidates_first(browser, shop):
    page = browser.post("/topology/source-picker/", {"source": "shop"}).content.decode()
    assert '<option value="items">items</option>' in page and '<option value="refunds">' in page
    assert "Watermark column" not in page  # no table yet

    page = browser.post(
        "/topology/source-picker/", {"source": "shop", "pick_dataset": "items"}
    ).content.decode()
    assert '<option value="items" selected>' in page
    for column in ("sku", "stock", "changed", "note"):
        assert f'name="pick_columns" value="{column}"' in page
    watermark = page[
        page.index('id="id_pick_watermark"') : page.index("</select>", page.index('id="id_pick_watermark"'))
    ]
    assert '<option value="changed" selected>changed (TIMESTAMP; timestamp)</option>' in watermark  # the best
    for column in ("sku", "note", "stock"):  # a plain integer is no cursor
        assert f'value="{column}"' not in watermark
    assert 'name="pick_primary_key" value="sku"' in page and "No primary key found" in page
    assert 'name="pick_primary_key" value="sku" id="id_pick_primary_key-1" checked' not in page

    page = browser.post(
        "/topology/source-picker/", {"source": "shop", "pick_dataset": "refunds"}
    ).content.decode()  # SQLite's INTEGER PRIMARY KEY numbers the rows: a candidate, and the key
    assert (
        '<input type="checkbox" name="pick_primary_key" value="id" id="id_pick_primary_key-1" checked>'
        in page
    )
    assert '<option value="id" selected>id (INTEGER; integer primary key)</option>' in page
    assert 'value="amount"' not in page[page.index('id="id_pick_watermark"') :]  # a float: no cursor
    assert 'name="pick_primary_key" value="amount" id="id_pick_primary_key-2">' in page


def test_a_files_source_offers_its_folders_and_their_format(browser, drop):
    page = browser.post(
        "/topology/source-picker/", {"source": "drop", "pick_dataset": "orders"}
    ).content.decode()
    assert '<option value="orders" selected>orders</option>' in page and "loose" not in page
    assert '<input type="hidden" name="pick_format" value="csv">' in page
    assert 'value="customer"' in page and "modification time" in page
    assert "id_pick_watermark" not in page and 'customer</code> <span class="muted">string' in page
    assert 'id</code> <span class="muted">bigint' in page  # typed from the file, as Spark reads it


def test_the_picker_shows_nothing_of_a_node_not_granted(client, shop, settings):
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"
    client.force_login(UserFactory(username="stranger"))
    page = client.post("/topology/source-picker/", {"source": "shop"}).content.decode()
    assert "no read grant on data node shop" in page and "items" not in page


def test_the_picks_are_saved_as_job_properties(browser, topology_nodes):
    form = without_template(
        **{"prop-0-key": "", "prop-0-value": "", "properties_text": ""},
        pick_dataset="sales.orders",
        pick_known_columns=["id", "updated_at", "note", "secret_ssn"],
        pick_columns=["id", "updated_at", "note"],
        pick_watermark="updated_at",
        pick_primary_key=["id"],
    )
    response = browser.post("/flows/new/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    properties = FlowConfig.objects.get(flow_name="orders").properties
    assert properties["source.jdbc.tables"] == "sales.orders"
    assert properties["extract.delta.fields"] == "updated_at"
    assert properties["columns.drop"] == "secret_ssn"
    assert properties["extract.primary.key.fields"] == "id"


def test_a_kept_column_is_hashed_or_encrypted_under_the_owners_customer_key(
    browser, owner, topology_nodes, settings, tmp_path
):
    form = without_template(
        **{"prop-0-key": "", "prop-0-value": "", "properties_text": ""},
        pick_dataset="sales.orders",
        pick_known_columns=["id", "email", "ssn", "note"],
        pick_columns=["id", "email", "ssn"],
        **{"pick_rule-email": "hash", "pick_rule-ssn": "encrypt", "pick_rule-note": "hash"},
        pick_watermark="id",
    )
    refused = browser.post("/flows/new/", form)
    assert refused.status_code == 400
    assert "columns.encrypt encrypts under the flow owner&#x27;s customer key, and the flow has none" in (
        refused.content.decode()
    )

    from portal.crypto.master import create_ring_file
    from portal.keys import services as keys

    create_ring_file(tmp_path / "master-key")
    settings.FLOWPORT_MASTER_KEY_FILE, settings.FLOWPORT_MASTER_KEY = str(tmp_path / "master-key"), ""
    key = keys.wrap_customer_key(user=owner, generate=True, label="main").customer_key
    response = browser.post("/flows/new/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    properties = FlowConfig.objects.get(flow_name="orders").properties
    assert properties["columns.drop"] == "note"  # unticked: its rule does not matter
    assert properties["columns.hash"] == "email"
    assert properties["columns.encrypt"] == "ssn"
    assert properties["encrypt.wrapped.key"] == key.wrapped_key


def test_a_pick_and_a_typed_property_for_the_same_key_is_refused(browser, topology_nodes):
    form = without_template(
        properties_text="", pick_dataset="sales.orders", pick_watermark="id"
    )  # prop-0 sets extract.delta.fields
    response = browser.post("/flows/new/", form)
    assert response.status_code == 400
    assert "&#x27;extract.delta.fields&#x27; is set twice: in the properties and in the source picker" in (
        response.content.decode()
    )
    assert not FlowConfig.objects.exists()


def test_the_picker_connects_as_the_flows_own_jdbc_user_judged_as_its_runs_are(browser, tmp_path):
    """A node without an account of its own: the picker logs in as the user the flow names, and
    that login, like the flow's runs, may not borrow the server's trust in the portal (this
    machine's PostgreSQL trusts it: `postgres` without a password is refused, shows no table)."""
    with scratch_database("picker") as billing:
        with billing.connect() as db:
            db.execute("CREATE TABLE invoices (id bigint, issued date)")
        services.create_data_node(
            {"name": "billing", "kind": "jdbc", "properties": {"url": billing.jdbc_url}}
        )
        typed = {"source": "billing", "prop-0-key": "source.conn.username", "prop-0-value": "nobody_here"}
        assert 'role "nobody_here" does not exist' in browser.post(
            "/topology/source-picker/", typed
        ).content.decode().replace("&quot;", '"')
        typed["prop-0-value"] = billing.user
        page = browser.post("/topology/source-picker/", typed).content.decode().replace("&#x27;", "'")
        assert f"data node 'billing': {FLOW_LOGIN_REFUSED}" in page
        assert "Refused: data node" not in page  # said once
        assert "public.invoices" not in page


def test_a_table_picked_without_a_watermark_is_read_whole_each_run(browser, topology_nodes):
    form = without_template(
        **{"prop-0-key": "", "prop-0-value": "", "properties_text": ""},
        pick_dataset="sales.orders",
        pick_known_columns=["id", "note"],
        pick_columns=["id", "note"],
        pick_watermark="",
    )
    response = browser.post("/flows/new/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    properties = FlowConfig.objects.get(flow_name="orders").properties
    assert properties["extract.is.full"] == "true" and "extract.delta.fields" not in properties


def test_a_watermark_typed_in_the_properties_wins_over_the_pickers_none(browser, topology_nodes):
    form = without_template(properties_text="", pick_dataset="sales.orders", pick_watermark="")
    response = browser.post("/flows/new/", form)  # prop-0 sets extract.delta.fields
    assert response.status_code == 302, response.content.decode()[:3000]
    properties = FlowConfig.objects.get(flow_name="orders").properties
    assert "extract.is.full" not in properties and properties["extract.delta.fields"]


def test_every_pick_survives_a_refused_save(browser, shop):
    """A save refused for something else (here the schedule) shows the picker as it was left, not
    its button: the table, the unticked column, the rule, the key and the watermark."""
    form = without_template(
        **{"prop-0-key": "", "prop-0-value": "", "properties_text": ""},
        source="shop",
        destinations=[],
        schedule="every tuesday",
        pick_dataset="items",
        pick_for="items",
        pick_known_columns=["sku", "stock", "changed", "note"],
        pick_columns=["sku", "stock", "changed"],
        pick_primary_key=["sku"],
        pick_watermark="changed",
        **{"pick_rule-sku": "hash"},
    )
    refused = browser.post("/flows/new/", form)
    assert refused.status_code == 400
    page = refused.content.decode()
    assert '<option value="items" selected>items</option>' in page
    assert 'value="stock" id="id_pick_column-2" checked>' in page
    assert 'value="note" id="id_pick_column-4">' in page  # left out, still left out
    assert '<option value="hash" selected>hash</option>' in page
    assert 'name="pick_primary_key" value="sku" id="id_pick_primary_key-1" checked>' in page
    assert '<option value="changed" selected>' in page
    assert not FlowConfig.objects.exists()

    # Another table looked at: its own suggestions, not the first one's picks.
    other = browser.post("/topology/source-picker/", {**form, "pick_dataset": "refunds"}).content.decode()
    assert 'name="pick_primary_key" value="id" id="id_pick_primary_key-1" checked>' in other
    assert '<option value="hash" selected>' not in other
