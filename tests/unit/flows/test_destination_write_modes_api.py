"""writeModes in /api/flowconfigs: a destination's own write mode, by node, taken and answered,
stored as destination.<node>.writer.write.mode; a node that is no destination of the flow, or a
keyed mode without primaryKey, is a 400 naming writeModes."""

from __future__ import annotations

import pytest

from portal.flows.models import FlowConfig
from tests.builders.flows import flow_body, nodes, packs  # noqa: F401 - autouse fixtures

pytestmark = pytest.mark.django_db


def test_the_api_takes_and_answers_a_write_mode_per_destination(api):
    body = flow_body(destinations=["lake", "archive"], writeModes={"archive": "overwrite"})
    created = api.post("/api/flowconfigs", body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["writeModes"] == {"archive": "overwrite"}
    assert created.json()["writeMode"] == "append"
    assert FlowConfig.objects.get().properties["destination.archive.writer.write.mode"] == "overwrite"

    patched = api.patch("/api/flowconfigs/sales/orders", {"writeModes": {"lake": "append"}}, format="json")
    assert patched.status_code == 200, patched.content
    stored = FlowConfig.objects.get().properties
    assert stored["destination.lake.writer.write.mode"] == "append"
    assert "destination.archive.writer.write.mode" not in stored  # sent, they replace the flow's
    assert stored["source.jdbc.tables"] == "orders"


def test_a_node_that_is_no_destination_or_a_keyed_mode_without_a_key_is_refused(api):
    refused = api.post(
        "/api/flowconfigs",
        flow_body(writeModes={"archive": "overwrite", "lake": "merge"}),
        format="json",
    )
    assert refused.status_code == 400
    problems = " ".join(refused.json()["writeModes"])
    assert "'archive' is not a destination of the flow (lake)" in problems
    assert "merge into lake needs primaryKey" in problems
    assert not FlowConfig.objects.exists()

    wrong = api.post("/api/flowconfigs", flow_body(writeModes={"lake": "upsert"}), format="json")
    assert wrong.status_code == 400 and "writeModes" in wrong.json()
