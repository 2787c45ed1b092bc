"""Picking a table, its columns and its watermark column on the flow form
(htmx fragment from the topology app) instead of typing property names; the
picks are saved as the job properties they stand for."""

from __future__ import annotations

import sqlite3

import pytest

from portal.flows.models import FlowConfig
from portal.topology import services
from tests.factories import UserFactory
from tests.unit.flows.test_flow_form import without_template

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(tmp_path):
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE items (sku TEXT, stock INTEGER, changed TIMESTAMP, note TEXT)")
        db.execute("CREATE TABLE refunds (id INTEGER)")
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


def test_the_picker_offers_tables_then_columns_and_ordered_watermark_columns(browser, shop):
    page = browser.post("/topology/source-picker/", {"source": "shop"}).content.decode()
    assert '<option value="items">items</option>' in page and '<option value="refunds">' in page
    assert "Watermark column" not in page  # no table yet

    page = browser.post(
        "/topology/source-picker/", {"source": "shop", "pick_dataset": "items"}
    ).content.decode()
    assert '<option value="items" selected>' in page
    for column in ("sku", "stock", "changed", "note"):
        assert f'name="pick_columns" value="{column}"' in page
    watermark = page[page.index('id="id_pick_watermark"') :]
    assert '<option value="stock">stock (INTEGER)</option>' in watermark
    assert '<option value="changed">changed (TIMESTAMP)</option>' in watermark
    assert 'value="sku"' not in watermark and 'value="note"' not in watermark


def test_a_files_source_offers_its_folders_and_their_format(browser, drop):
    page = browser.post(
        "/topology/source-picker/", {"source": "drop", "pick_dataset": "orders"}
    ).content.decode()
    assert '<option value="orders" selected>orders</option>' in page and "loose" not in page
    assert '<input type="hidden" name="pick_format" value="csv">' in page
    assert 'value="customer"' in page and "modification time" in page


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
    )
    response = browser.post("/flows/new/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    properties = FlowConfig.objects.get(flow_name="orders").properties
    assert properties["source.jdbc.tables"] == "sales.orders"
    assert properties["extract.delta.fields"] == "updated_at"
    assert properties["converter.drop.fields"] == "secret_ssn"


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


def test_the_picker_connects_as_the_flows_own_jdbc_user(browser, tmp_path):
    import psycopg
    from django.db import connection

    own = connection.settings_dict
    host, port = own["HOST"] or "127.0.0.1", int(own["PORT"] or 5432)
    name = f"{own['NAME']}_picker"[:60]
    with psycopg.connect(host=host, port=port, user=own["USER"], dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(host=host, port=port, user=own["USER"], dbname=name, autocommit=True) as db:
            db.execute("CREATE TABLE invoices (id bigint, issued date)")
        url = f"jdbc:postgresql://{host}:{port}/{name}"
        services.create_data_node({"name": "billing", "kind": "jdbc", "properties": {"url": url}})
        typed = {"source": "billing", "prop-0-key": "source.conn.username", "prop-0-value": "nobody_here"}
        assert 'role "nobody_here" does not exist' in browser.post(
            "/topology/source-picker/", typed
        ).content.decode().replace("&quot;", '"')
        typed["prop-0-value"] = own["USER"]
        page = browser.post("/topology/source-picker/", typed).content.decode()
        assert '<option value="public.invoices">public.invoices</option>' in page
    finally:
        with psycopg.connect(
            host=host, port=port, user=own["USER"], dbname="postgres", autocommit=True
        ) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
