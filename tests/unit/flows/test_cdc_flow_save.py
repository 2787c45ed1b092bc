"""A cdc flow is checked at save like any other: without the tables to capture, or with a pattern
(the publication names tables, it matches nothing), the API answers 400 naming the key, before any
run; a well-formed one is stored."""

from __future__ import annotations

import pytest

from portal.flows.models import FlowConfig
from tests.builders.flows import flow_body, nodes, packs  # noqa: F401 - autouse fixtures

pytestmark = pytest.mark.django_db

CDC = {
    "source.class": "portal.pipeline.sources.cdc.CdcSource",
    "source.conn.username": "replicator",
    "writer.output.format": "parquet",
}


def _body(**properties: str) -> dict:
    return flow_body(templateUris="", properties={**CDC, **properties})


def test_a_cdc_flow_without_its_tables_is_refused_naming_the_key(api):
    refused = api.post("/api/flowconfigs", _body(), format="json")
    assert refused.status_code == 400, refused.content
    assert any("source.cdc.tables" in problem for problem in refused.json()["properties"]), refused.json()
    assert not FlowConfig.objects.exists()


def test_a_cdc_flow_naming_a_pattern_is_refused_naming_the_key(api):
    refused = api.post("/api/flowconfigs", _body(**{"source.cdc.tables": "shop.*"}), format="json")
    assert refused.status_code == 400, refused.content
    assert refused.json()["properties"] == [
        "'source.cdc.tables': 'shop.*' is not a table named schema.table (plain names, no patterns)"
    ]


def test_a_well_formed_cdc_flow_is_stored(api):
    saved = api.post("/api/flowconfigs", _body(**{"source.cdc.tables": "shop.customers"}), format="json")
    assert saved.status_code == 201, saved.content
    assert FlowConfig.objects.get().properties["source.cdc.tables"] == "shop.customers"


def test_pausing_or_deleting_a_cdc_flow_says_what_becomes_of_its_slot(api, owner):
    from django.test import Client

    assert (
        api.post(
            "/api/flowconfigs", _body(**{"source.cdc.tables": "shop.customers"}), format="json"
        ).status_code
        == 201
    )
    browser = Client()
    browser.force_login(owner)
    paused = browser.post("/flows/sales/orders/pause/", follow=True).content.decode()
    assert "the replication slot stays and the server keeps write-ahead log for it" in paused
    asked = browser.get("/flows/sales/orders/delete/").content.decode()
    assert 'data-test="capture-on-delete"' in asked and "drops its replication slot and publication" in asked


def test_a_flow_that_captures_nothing_says_nothing_of_slots(api, owner):
    from django.test import Client

    assert api.post("/api/flowconfigs", flow_body(), format="json").status_code == 201
    browser = Client()
    browser.force_login(owner)
    assert "replication slot" not in browser.post("/flows/sales/orders/pause/", follow=True).content.decode()
    assert "replication slot" not in browser.get("/flows/sales/orders/delete/").content.decode()
