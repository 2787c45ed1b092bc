"""Stories of people using the flow pages."""

from __future__ import annotations

import pytest

from portal.flows.models import FlowConfig
from tests.factories import FlowConfigFactory
from tests.unit.topology.helpers import nodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def sales_nodes(db):
    """The data nodes the stories' flows name: a save refuses a name that is no data node."""
    nodes("pg-orders", kind="jdbc")
    nodes("lake", "archive")


def test_visitors_are_sent_to_log_in(client):
    response = client.get("/flows/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_a_user_logs_in_with_a_password_and_sees_the_flows(client, owner):
    from tests.factories import PASSWORD

    response = client.post("/login/", {"username": owner.username, "password": PASSWORD})
    assert response.status_code == 302
    page = client.get("/flows/")
    assert page.status_code == 200
    assert b"No flows match" in page.content


def test_search_returns_only_the_table_fragment_for_htmx(browser, owner):
    FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    FlowConfigFactory(flow_group="hr", flow_name="people", source="pg-staff", owner=owner)
    fragment = browser.get("/flows/?q=orders", headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    assert b"<html" not in fragment.content
    assert b"sales/orders" in fragment.content and b"hr/people" not in fragment.content
    assert "HX-Request" in fragment["Vary"]
    whole = browser.get("/flows/?q=orders")
    assert b"<html" in whole.content and b"sales/orders" in whole.content


def test_creating_a_flow_with_a_mistake_then_fixing_it(browser, owner, sales_nodes):
    form = {
        "flow_group": "sales",
        "flow_name": "orders",
        "schedule": "61 * * * *",
        "source": "pg-orders",
        "destinations_text": "lake, archive",
        "properties_text": "source.jdbc.tables=orders\nextract.delta.fields=updated_at",
    }
    mistake = browser.post("/flows/new/", form)
    assert mistake.status_code == 400
    assert b"minute 61 is outside 0-59" in mistake.content
    assert not FlowConfig.objects.exists()

    fixed = browser.post("/flows/new/", {**form, "schedule": "*/10 * * * *"})
    assert fixed.status_code == 302
    flow = FlowConfig.objects.get()
    assert flow.owner == owner
    assert flow.destinations == ["lake", "archive"]
    assert flow.properties == {"source.jdbc.tables": "orders", "extract.delta.fields": "updated_at"}
    detail = browser.get(fixed["Location"])
    assert b"extract.delta.fields" in detail.content


def test_a_malformed_property_line_is_reported_by_line(browser):
    response = browser.post(
        "/flows/new/", {"flow_group": "g", "flow_name": "n", "properties_text": "ok=1\nnot a pair"}
    )
    assert response.status_code == 400
    assert b"Line 2: write key=value" in response.content


def test_the_owner_edits_and_deletes_a_flow(browser, owner, sales_nodes):
    FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner, description="old")
    properties = "a=b\nsource.jdbc.tables=orders\nextract.is.full=true"
    edit = browser.post(
        "/flows/sales/orders/edit/",
        {
            "description": "new",
            "schedule": "0 2 * * *",
            "source": "pg-orders",
            "properties_text": properties,
            "destinations_text": "lake",
        },
    )
    assert edit.status_code == 302
    flow = FlowConfig.objects.get()
    assert (flow.description, flow.flow_name, flow.schedule) == ("new", "orders", "0 2 * * *")
    assert flow.properties == {"a": "b", "source.jdbc.tables": "orders", "extract.is.full": "true"}
    assert browser.post("/flows/sales/orders/delete/").status_code == 302
    assert not FlowConfig.objects.exists()


def test_someone_else_cannot_edit_or_delete(client, owner, outsider):
    FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    client.force_login(outsider)
    assert client.get("/flows/sales/orders/").status_code == 200
    assert client.get("/flows/sales/orders/edit/").status_code == 403
    assert client.post("/flows/sales/orders/delete/").status_code == 403
    assert FlowConfig.objects.exists()


def test_a_flow_without_a_schedule_says_it_runs_when_saved(browser, owner, sales_nodes):
    form = {
        "flow_group": "sales",
        "flow_name": "once",
        "schedule": "",
        "source": "pg-orders",
        "destinations_text": "lake",
        "properties_text": "source.jdbc.tables=orders\nextract.is.full=true",
    }
    saved = browser.post("/flows/new/", form)
    assert saved.status_code == 302
    flow = FlowConfig.objects.get()
    assert flow.executions.get().trigger == "RUN_IMMEDIATELY"
    detail = browser.get(saved["Location"]).content.decode()
    assert "none — runs once when saved" in detail and ">runs once<" not in detail
    assert "Run immediately" not in detail  # it did run on save: no "Run immediately: no"
    assert "once, on save" in browser.get("/flows/").content.decode()
