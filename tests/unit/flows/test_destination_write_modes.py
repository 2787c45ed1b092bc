"""A flow into the lake and on to the archive: merged into the lake by key, overwritten in the
archive. The form offers a write mode per destination; each hop's job gets its own, and no job sees
the per-destination key. The limits on records that cannot be read are fields of the form too."""

from __future__ import annotations

import pytest

from portal.flows.compiler import compile_flow
from portal.flows.compiler.scoped import for_destination
from portal.flows.models import FlowConfig
from tests.builders.flows import new_flow
from tests.builders.forms import read_form, submit_as_rendered

pytestmark = pytest.mark.django_db


def test_each_destination_takes_the_rows_in_its_own_write_mode(browser, owner, topology_nodes, sales_pack):
    page = browser.get("/flows/new/").content.decode()
    assert 'name="write_mode@archive"' in page and "A write mode per destination" in page
    saved = browser.post(
        "/flows/new/",
        new_flow(write_mode="merge", primary_key="order_id", **{"write_mode@archive": "overwrite"}),
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]
    flow = FlowConfig.objects.get()
    assert flow.properties["writer.write.mode"] == "merge"
    assert flow.properties["destination.archive.writer.write.mode"] == "overwrite"
    assert "destination.lake.writer.write.mode" not in flow.properties  # left to the flow's

    jobs = {job.destination_node: job.properties for job in compile_flow(flow).jobs}
    assert jobs["lake"]["writer.write.mode"] == "merge"
    assert jobs["archive"]["writer.write.mode"] == "overwrite"
    assert not any(key.startswith("destination.") for properties in jobs.values() for key in properties)

    fields = dict(read_form(browser.get("/flows/sales/orders/edit/").content.decode()).fields)
    assert fields["write_mode@archive"] == "overwrite" and fields["write_mode"] == "merge"
    assert "destination.archive.writer.write.mode" not in fields.values()  # a select, not a property row
    edited = submit_as_rendered(browser, "/flows/sales/orders/edit/", **{"write_mode@archive": ""})
    assert edited.status_code == 302
    assert "destination.archive.writer.write.mode" not in FlowConfig.objects.get().properties


def test_a_keyed_mode_into_one_destination_without_a_key_is_refused_at_its_select(
    browser, topology_nodes, sales_pack
):
    response = browser.post("/flows/new/", new_flow(**{"write_mode@lake": "history"}))
    assert response.status_code == 400
    html = response.content.decode()
    assert "history into lake needs a primary key" in html
    assert (
        'id="id_write_mode@lake_errors"' in html
        and '<details class="field" id="destination-write-modes" open>' in html
    )
    assert not FlowConfig.objects.exists()


def test_a_key_for_one_destination_wins_there_only() -> None:
    properties = {
        "writer.write.mode": "append",
        "destination.archive.writer.write.mode": "overwrite",
        "destination.my.lake.a": "x",
        "destination.elsewhere.b": "kept: no destination of the flow",
    }
    flow = ["archive", "my.lake"]
    assert for_destination(properties, "archive", flow) == {
        "writer.write.mode": "overwrite",
        "destination.elsewhere.b": "kept: no destination of the flow",
    }
    assert for_destination(properties, "my.lake", flow) == {
        "writer.write.mode": "append",
        "a": "x",
        "destination.elsewhere.b": "kept: no destination of the flow",
    }


def test_the_bad_record_limits_are_fields_checked_where_they_are_typed(browser, topology_nodes, sales_pack):
    refused = browser.post("/flows/new/", new_flow(errors_max_count="-1", errors_max_fraction="1.5"))
    assert refused.status_code == 400
    html = refused.content.decode()
    assert 'id="id_errors_max_count_errors"' in html and "greater than or equal to 0" in html
    assert "less than or equal to 1" in html
    assert not FlowConfig.objects.exists()

    saved = browser.post("/flows/new/", new_flow(errors_max_count="25", errors_max_fraction="0.01"))
    assert saved.status_code == 302, saved.content.decode()[:2000]
    properties = FlowConfig.objects.get().properties
    assert (properties["errors.max.count"], properties["errors.max.fraction"]) == ("25", "0.01")
    fields = dict(read_form(browser.get("/flows/sales/orders/edit/").content.decode()).fields)
    assert (fields["errors_max_count"], fields["errors_max_fraction"]) == ("25", "0.01")
    assert "errors.max.count" not in fields.values()  # a field, not a property row
