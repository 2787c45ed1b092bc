"""A flow's write mode and primary key are fields of their own, in the form and in the API, not a
template key to know: chosen, refused without the key a mode needs, shown again on edit."""

from __future__ import annotations

import pytest

from portal.flows.models import FlowConfig
from tests.builders.flows import new_flow
from tests.builders.forms import read_form, submit_as_rendered

pytestmark = pytest.mark.django_db


def test_a_flow_saved_with_a_merge_on_a_key_keeps_both_and_shows_them_on_edit(
    browser, owner, topology_nodes, sales_pack
):
    page = browser.get("/flows/new/").content.decode()
    assert '<select name="write_mode"' in page and "history" in page
    saved = browser.post("/flows/new/", new_flow(write_mode="merge", primary_key="order_id"))
    assert saved.status_code == 302, saved.content.decode()[:2000]
    flow = FlowConfig.objects.get()
    assert flow.properties["writer.write.mode"] == "merge"
    assert flow.properties["extract.primary.key.fields"] == "order_id"

    fields = dict(read_form(browser.get("/flows/sales/orders/edit/").content.decode()).fields)
    assert (fields["write_mode"], fields["primary_key"]) == ("merge", "order_id")
    assert "writer.write.mode" not in fields.values()  # a field, not a property row
    assert submit_as_rendered(browser, "/flows/sales/orders/edit/", write_mode="history").status_code == 302
    assert FlowConfig.objects.get().properties["writer.write.mode"] == "history"


def test_a_merge_without_a_primary_key_is_refused_by_the_key_field(browser, topology_nodes, sales_pack):
    response = browser.post("/flows/new/", new_flow(write_mode="history"))
    assert response.status_code == 400
    html = response.content.decode()
    assert "history needs a primary key" in html
    assert 'id="id_primary_key_errors"' in html
    assert not FlowConfig.objects.exists()
