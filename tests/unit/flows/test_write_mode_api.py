"""writeMode and primaryKey in /api/flowconfigs: taken, answered, refused without the key a mode
needs, and stored as the properties they stand for beside the flow's others."""

from __future__ import annotations

import pytest

from portal.flows.models import FlowConfig
from tests.builders.flows import flow_body, nodes, packs  # noqa: F401 - autouse fixtures

pytestmark = pytest.mark.django_db


def test_the_api_takes_and_answers_write_mode_and_primary_key(api):
    created = api.post("/api/flowconfigs", flow_body(writeMode="overwrite"), format="json")
    assert created.status_code == 201, created.content
    assert created.json()["writeMode"] == "overwrite" and created.json()["primaryKey"] == []
    assert FlowConfig.objects.get().properties["writer.write.mode"] == "overwrite"

    refused = api.patch("/api/flowconfigs/sales/orders", {"writeMode": "merge"}, format="json")
    assert refused.status_code == 400
    assert "needs the column(s) that identify a row" in refused.json()["primaryKey"][0]

    patched = api.patch(
        "/api/flowconfigs/sales/orders", {"writeMode": "merge", "primaryKey": ["region", "id"]}, format="json"
    )
    assert patched.status_code == 200, patched.content
    assert (patched.json()["writeMode"], patched.json()["primaryKey"]) == ("merge", ["region", "id"])
    stored = FlowConfig.objects.get().properties
    assert stored["extract.primary.key.fields"] == "region,id"
    assert stored["source.jdbc.tables"] == "orders"  # the other properties kept

    wrong = api.patch("/api/flowconfigs/sales/orders", {"writeMode": "upsert"}, format="json")
    assert wrong.status_code == 400 and "writeMode" in wrong.json()
