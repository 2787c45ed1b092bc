"""A flow into a database: the form offers the destination's table, and left empty each table the
flow reads lands in a table of its own name — the preview says where before anything runs."""

from __future__ import annotations

import pytest

from portal.flows.compiler import compile_flow
from portal.flows.models import FlowConfig
from portal.topology import services as topology
from tests.unit.topology.helpers import executor

pytestmark = pytest.mark.django_db


@pytest.fixture
def into_a_database(db) -> None:
    """pg-sales (PostgreSQL) → warehouse (another PostgreSQL database)."""
    for name, url in (("pg-sales", "jdbc:postgresql://db/sales"), ("warehouse", "jdbc:postgresql://dw/dw")):
        topology.create_data_node({"name": name, "kind": "jdbc", "properties": {"url": url}})
    executor("load", "pg-sales>warehouse")


def _flow(**changes: str) -> dict[str, str]:
    form = {
        "flow_group": "sales",
        "flow_name": "orders-to-dw",
        "source": "pg-sales",
        "destinations": "warehouse",
        "properties_text": "source.jdbc.tables=public.orders\nextract.is.full=true",
        "prop-0-key": "",
        "prop-0-value": "",
    }
    return {**form, **changes}


def test_the_form_offers_the_table_and_left_empty_it_is_the_source_table(browser, into_a_database):
    page = browser.get("/flows/new/").content.decode()
    assert 'name="table@warehouse"' in page and "Table in warehouse" in page

    preview = browser.post("/flows/new/?part=compile", _flow()).content.decode()
    assert "into table <code>orders</code>" in preview

    saved = browser.post("/flows/new/", _flow())
    assert saved.status_code == 302, saved.content.decode()[:2000]
    flow = FlowConfig.objects.get()
    assert not any("writer.jdbc.table" in key for key in flow.properties)
    (job,) = compile_flow(flow).jobs
    assert job.destination_tables() == ["orders"]


def test_a_table_typed_for_the_destination_is_where_its_rows_go(browser, into_a_database):
    saved = browser.post("/flows/new/", _flow(**{"table@warehouse": "analytics.orders_copy"}))
    assert saved.status_code == 302, saved.content.decode()[:2000]
    flow = FlowConfig.objects.get()
    assert flow.properties["destination.warehouse.writer.jdbc.table"] == "analytics.orders_copy"
    (job,) = compile_flow(flow).jobs
    assert job.properties["writer.jdbc.table"] == "analytics.orders_copy"
    assert job.destination_tables() == ["analytics.orders_copy"]

    edit = browser.get("/flows/sales/orders-to-dw/edit/").content.decode()
    assert 'name="table@warehouse"' in edit and 'value="analytics.orders_copy"' in edit
    assert "destination.warehouse.writer.jdbc.table" not in edit  # an input, not a property row


def test_a_bad_table_pattern_is_refused_when_the_flow_is_saved(browser, into_a_database):
    refused = browser.post("/flows/new/", _flow(**{"table@warehouse": "copy_{tabel}"}))
    assert refused.status_code == 400
    assert "unknown placeholder &#x27;{tabel}&#x27;" in refused.content.decode()
    assert not FlowConfig.objects.exists()
