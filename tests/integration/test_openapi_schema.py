"""The OpenAPI schema is what API users and the fuzz test trust: it must build
cleanly, validate, and document every endpoint."""

from __future__ import annotations

import yaml
from django.core.management import call_command


def test_the_schema_builds_without_warnings_and_validates(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--fail-on-warn", "--validate", "--file", str(target))
    schema = yaml.safe_load(target.read_text())
    paths = schema["paths"]
    assert "/api/flowconfigs" in paths
    assert {"get", "put", "patch", "delete"} <= set(paths["/api/flowconfigs/{flowGroup}/{flowName}"])
    flow = schema["components"]["schemas"]["FlowConfig"]["properties"]
    assert {"flowGroup", "flowName", "schedule", "runImmediately", "templateUris", "properties"} <= set(flow)
