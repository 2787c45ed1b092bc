"""The design document's four curli examples ("Manage
Gobblin Flow"), sent to Flowport exactly as written: same URL, method,
headers and body. Flowport adds only authentication, which curli leaves to
the transport."""

from __future__ import annotations

import pytest

from portal.flows.models import FlowConfig

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("packs")]

AS_WRITTEN = (
    '{"flowName" : "myflow1", "flowGroup" : "mygroup", "templateNames" : "FS:///mytemplate.template", '
    '"schedule" : "", "properties" : {"prop1" : "value1"}}'
)
# The examples name no data nodes, so as written the flow could never run and is refused; with
# Gobblin's own source and destination identifiers (and what a files source reads) it is created.
NODES = {
    "gobblin.flow.sourceIdentifier": "lake",
    "gobblin.flow.destinationIdentifier": "archive",
    "source.files.format": "csv",
}
_NODES = ", ".join(f'"{key}" : "{value}"' for key, value in NODES.items())
CREATE = AS_WRITTEN.replace('"prop1" : "value1"', f'"prop1" : "value1", {_NODES}')
UPDATE = (
    '{"flowName" : "myflow1", "flowGroup" : "mygroup", "templateName" : "FS:///mytemplate.template", '
    f'"schedule" : "", "properties" : {{"prop1" : "value2", {_NODES}}}}}'
)


def curli(wire, url: str, method: str, data: str | None = None, **headers):
    """`curli URL -X METHOD -H … --data …`: curl sends --data as form-urlencoded."""
    from django.test import Client

    path = url.removeprefix("http://localhost:8080")
    extra = {"RAW_URI": path, **wire.auth}
    for name, value in headers.items():
        extra["HTTP_" + name.upper().replace("-", "_")] = value
    return Client().generic(
        method, path, data or "", content_type="application/x-www-form-urlencoded", **extra
    )


def test_the_four_curli_examples_create_update_read_and_delete_a_flow(wire, owner):
    # As written: no data nodes, refused with Gobblin's error record naming the place.
    refused = curli(
        wire,
        "http://localhost:8080/flowconfigs",
        "POST",
        AS_WRITTEN,
        **{"X-RestLi-Method": "create", "X-RestLi-Protocol-Version": "2.0.0"},
    )
    assert refused.status_code == 400
    assert "Choose at least one destination data node." in refused.json()["message"]
    assert not FlowConfig.objects.exists()
    # Create a flow definition.
    created = curli(
        wire,
        "http://localhost:8080/flowconfigs",
        "POST",
        CREATE,
        **{"X-RestLi-Method": "create", "X-RestLi-Protocol-Version": "2.0.0"},
    )
    assert created.status_code == 201, created.content
    assert created["X-RestLi-Id"] == "(flowGroup:mygroup,flowName:myflow1)"  # the key alone, as Rest.li
    assert created["Location"].endswith("/flowconfigs/($params:(),flowGroup:mygroup,flowName:myflow1)")
    flow = FlowConfig.objects.get(flow_group="mygroup", flow_name="myflow1")
    assert flow.owner == owner and flow.properties == {"prop1": "value1", **NODES}
    assert flow.template_uris == "FS:///mytemplate.template"

    # Update a flow definition (the example's `templateName` is the same field).
    updated = curli(
        wire,
        "http://localhost:8080/flowconfigs/(flowGroup:mygroup,flowName:myflow1)",
        "PUT",
        UPDATE,
        **{"X-RestLi-Method": "update", "X-RestLi-Protocol-Version": "2.0.0"},
    )
    assert updated.status_code == 200, updated.content
    flow.refresh_from_db()
    assert flow.properties == {"prop1": "value2", **NODES}

    # Get flow definition: the example asks for `myflow`, which nobody created.
    missing = curli(
        wire,
        "http://localhost:8080/flowconfigs/(flowGroup:mygroup,flowName:myflow)",
        "GET",
        **{"X-RestLi-Protocol-Version": "2.0.0"},
    )
    assert missing.status_code == 404
    assert missing["X-RestLi-Error-Response"] == "true"
    assert missing.json()["status"] == 404 and "myflow" in missing.json()["message"]
    # …and the same request for the flow that exists answers its FlowConfig record.
    found = curli(
        wire,
        "http://localhost:8080/flowconfigs/(flowGroup:mygroup,flowName:myflow1)",
        "GET",
        **{"X-RestLi-Protocol-Version": "2.0.0"},
    )
    assert found.status_code == 200
    assert found.json() == {
        "id": {"flowGroup": "mygroup", "flowName": "myflow1"},
        "templateUris": "FS:///mytemplate.template",
        "properties": {"prop1": "value2", **NODES},
    }

    # Delete a flow definition.
    deleted = curli(
        wire,
        "http://localhost:8080/flowconfigs/(flowGroup:mygroup,flowName:myflow1)",
        "DELETE",
        **{"X-RestLi-Protocol-Version": "2.0.0"},
    )
    assert deleted.status_code == 200, deleted.content
    assert not FlowConfig.objects.filter(flow_group="mygroup", flow_name="myflow1").exists()


def test_a_run_once_flow_from_the_example_runs_at_once(wire):
    """The examples' empty schedule is Gobblin's run-once flow: it runs on create."""
    curli(
        wire,
        "http://localhost:8080/flowconfigs",
        "POST",
        CREATE,
        **{"X-RestLi-Method": "create", "X-RestLi-Protocol-Version": "2.0.0"},
    )
    flow = FlowConfig.objects.get(flow_group="mygroup", flow_name="myflow1")
    assert flow.run_immediately and not flow.schedule
    assert flow.executions.count() == 1


def test_without_credentials_the_answer_is_a_restli_401(wire):
    from django.test import Client

    response = Client().get("/flowconfigs/(flowGroup:mygroup,flowName:myflow1)", RAW_URI="/flowconfigs/x")
    assert response.status_code == 401
    assert response["X-RestLi-Error-Response"] == "true"
    assert response.json()["exceptionClass"] == "com.linkedin.restli.server.RestLiServiceException"


def test_an_unknown_path_under_a_resource_is_a_restli_404_not_a_page(wire):
    response = wire.send("GET", "/flowconfigs/(flowGroup:g,flowName:n)/extra")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response["X-RestLi-Error-Response"] == "true"
