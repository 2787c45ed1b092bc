"""Stories of people managing flows through `/api/flowconfigs`."""

from __future__ import annotations

import json

import pytest

from portal.flows.models import FlowConfig
from portal.flows.signals import flow_catalog_changed
from tests.builders.api import api_client_for
from tests.builders.flows import RUNNABLE, flow_body, nodes, packs  # noqa: F401 - autouse fixtures
from tests.factories import FlowConfigFactory
from tests.unit.templatepacks.factories import make_pack

pytestmark = pytest.mark.django_db


def test_owner_creates_a_flow_and_reads_it_back(api, owner):
    response = api.post("/api/flowconfigs", flow_body(), format="json")
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["flowGroup"] == "sales" and created["flowName"] == "orders"
    assert created["owner"] == owner.username
    assert created["compilation"]["status"] in {"PENDING", "COMPILED", "FAILED"}

    fetched = api.get("/api/flowconfigs/sales/orders").json()
    assert fetched["properties"] == RUNNABLE
    assert fetched["destinations"] == ["lake"]
    assert fetched["schedule"] == "*/15 * * * *"


def test_gaas_restli_path_answers_like_the_plain_one(api):
    FlowConfigFactory(flow_group="mygroup", flow_name="myflow1", owner=api.handler._force_user)
    plain = api.get("/api/flowconfigs/mygroup/myflow1").json()
    restli = api.get("/api/flowconfigs/(flowGroup:mygroup,flowName:myflow1)").json()
    assert restli == plain


def test_gaas_curl_examples_work(api):
    """Create with `templateNames`, update and delete through the Rest.li key."""
    create = {
        "flowName": "myflow1",
        "flowGroup": "mygroup",
        "templateNames": "FS:///mytemplate.template",
        "schedule": "",
        "properties": {"prop1": "value1"},
    }
    # As GaaS's example sends it, the flow names no data nodes: it could never run, so it is refused.
    refused = api.post("/api/flowconfigs", create, format="json")
    assert refused.status_code == 400
    assert refused.json() == {
        "source": ["Choose the data node the data is read from."],
        "destinations": ["Choose at least one destination data node."],
    }
    # Gobblin names them in properties; a files source says its format.
    create["properties"] = {
        "prop1": "value1",
        "gobblin.flow.sourceIdentifier": "lake",
        "gobblin.flow.destinationIdentifier": "archive",
        "source.files.format": "csv",
    }
    assert api.post("/api/flowconfigs", create, format="json").status_code == 201
    update = {**create, "templateName": "FS:///mytemplate.template"}
    update["properties"] = {**create["properties"], "prop1": "value2"}
    del update["templateNames"]
    url = "/api/flowconfigs/(flowGroup:mygroup,flowName:myflow1)"
    response = api.put(url, update, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["properties"]["prop1"] == "value2"
    assert response.json()["templateUris"] == "FS:///mytemplate.template"
    assert api.delete(url).status_code == 204
    assert not FlowConfig.objects.filter(flow_group="mygroup").exists()


def test_creating_an_existing_key_is_a_conflict(api):
    assert api.post("/api/flowconfigs", flow_body(), format="json").status_code == 201
    response = api.post("/api/flowconfigs", flow_body(description="again"), format="json")
    assert response.status_code == 409
    assert "already exists" in response.json()["detail"]
    assert FlowConfig.objects.get().description == ""


def test_a_quartz_schedule_from_gobblin_is_converted(api):
    response = api.post("/api/flowconfigs", flow_body(schedule="0 0/5 * * * ?"), format="json")
    assert response.status_code == 201
    assert response.json()["schedule"] == "0/5 * * * *"


def test_source_and_destinations_may_come_from_gobblin_properties(api):
    properties = {
        "gobblin.flow.sourceIdentifier": "pg-orders",
        "gobblin.flow.destinationIdentifier": "lake,archive",
    }
    body = flow_body(source="", destinations=[], properties={**RUNNABLE, **properties})
    flow = api.post("/api/flowconfigs", body, format="json").json()
    assert flow["source"] == "pg-orders"
    assert flow["destinations"] == ["lake", "archive"]


@pytest.mark.parametrize(
    ("overrides", "field", "reason"),
    [
        ({"schedule": "61 * * * *"}, "schedule", "minute 61"),
        ({"flowName": "bad name!"}, "flowName", "letters, digits"),
        ({"flowGroup": "g" * 129}, "flowGroup", "no more than 128 characters"),
        ({"templateUris": "http://example.org/x.template"}, "templateUris", "not a template URI"),
        ({"templateUris": "pack://p/../etc.template"}, "templateUris", "not a template URI"),
        ({"properties": {"retries": 3}}, "properties", "Must be a string, not int"),
        ({"properties": {"on": True}}, "properties", "not bool"),
        ({"properties": ["a=b"]}, "properties", "dictionary"),
        ({"destinations": ["lake", "lake"]}, "destinations", "twice"),
        ({"destinations": ["no spaces"]}, "destinations", "letters, digits"),
        ({"source": "a/b"}, "source", "letters, digits"),
        ({"runImmediately": "maybe"}, "runImmediately", "valid boolean"),
        ({"flowName": 7}, "flowName", "not int"),
    ],
)
def test_bad_input_names_the_field_and_saves_nothing(api, overrides, field, reason):
    response = api.post("/api/flowconfigs", flow_body(**overrides), format="json")
    assert response.status_code == 400, response.content
    errors = response.json()
    assert field in errors, errors
    assert reason in json.dumps(errors[field]), errors
    assert reason not in json.dumps({k: v for k, v in errors.items() if k != field}), "said twice"
    assert not FlowConfig.objects.exists()


def test_a_template_the_owner_cannot_read_is_refused(api, outsider):
    make_pack(outsider, "private-pack", {"secret.template": "a = 1"})
    response = api.post(
        "/api/flowconfigs", flow_body(templateUris="pack://private-pack/secret.template"), format="json"
    )
    assert response.status_code == 400
    assert "pack://private-pack/secret.template" in response.json()["templateUris"][0]
    assert not FlowConfig.objects.exists()


def test_a_missing_key_field_is_required(api):
    body = flow_body()
    del body["flowName"]
    response = api.post("/api/flowconfigs", body, format="json")
    assert response.status_code == 400
    assert response.json() == {"flowName": ["This field is required."]}


def test_a_body_that_is_not_json_is_refused(api):
    response = api.post("/api/flowconfigs", "flowName=x", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    malformed = api.post("/api/flowconfigs", "{not json", content_type="application/json")
    assert malformed.status_code == 400
    assert "JSON parse error" in malformed.json()["detail"]
    assert not FlowConfig.objects.exists()


def test_a_body_over_one_mebibyte_is_refused(api):
    huge = flow_body(properties={"blob": "x" * (1024 * 1024)})
    response = api.post("/api/flowconfigs", huge, format="json")
    assert response.status_code == 413
    assert "limit" in response.json()["detail"]
    assert not FlowConfig.objects.exists()


def test_the_key_cannot_change_on_update(api):
    api.post("/api/flowconfigs", flow_body(), format="json")
    response = api.patch("/api/flowconfigs/sales/orders", {"flowName": "renamed"}, format="json")
    assert response.status_code == 400
    assert "cannot be changed" in response.json()["flowName"][0]
    same_key = api.patch(
        "/api/flowconfigs/sales/orders", {"flowName": "orders", "description": "ok"}, format="json"
    )
    assert same_key.status_code == 200
    assert FlowConfig.objects.get().flow_name == "orders"


def test_patch_changes_only_what_it_sends_and_put_replaces(api):
    api.post("/api/flowconfigs", flow_body(description="nightly"), format="json")
    patched = api.patch("/api/flowconfigs/sales/orders", {"schedule": "0 2 * * *"}, format="json").json()
    assert patched["schedule"] == "0 2 * * *" and patched["description"] == "nightly"
    replacement = {"source": "pg-orders", "destinations": ["archive"], "properties": {**RUNNABLE, "a": "b"}}
    put = api.put("/api/flowconfigs/sales/orders", replacement, format="json").json()
    assert put["description"] == "" and put["schedule"] == "" and put["properties"] == {**RUNNABLE, "a": "b"}
    assert put["templateUris"] == "" and put["destinations"] == ["archive"]


def test_a_restli_patch_document_sent_here_is_refused_not_dropped(api):
    """Gobblin's partial_update body sent to the Rest.li-keyed /api path: it used to answer 200
    and change nothing. It is refused, saying where such a document is read."""
    api.post("/api/flowconfigs", flow_body(description="nightly"), format="json")
    url = "/api/flowconfigs/(flowGroup:sales,flowName:orders)"
    patch = {
        "patch": {"$set": {"description": "changed"}, "schedule": {"$set": {"cronSchedule": "0 0 3 * * ?"}}}
    }
    response = api.patch(url, patch, format="json")
    assert response.status_code == 400
    assert "/flowconfigsV2/(flowGroup:g,flowName:n)" in response.json()["patch"][0]
    flow = FlowConfig.objects.get()
    assert flow.description == "nightly" and flow.schedule == "*/15 * * * *"
    # Any field the API does not read is refused too; a GET's answer sent back is not.
    typo = api.patch(url, {"shedule": "0 3 * * *"}, format="json")
    assert typo.status_code == 400 and typo.json() == {"shedule": ["Unknown field."]}
    read = api.get(url).json()
    assert api.put(url, {**read, "description": "again"}, format="json").status_code == 200
    assert FlowConfig.objects.get().description == "again"


def test_an_invalid_update_leaves_the_flow_as_it_was(api):
    api.post("/api/flowconfigs", flow_body(), format="json")
    response = api.patch(
        "/api/flowconfigs/sales/orders", {"schedule": "99 * * * *", "description": "x"}, format="json"
    )
    assert response.status_code == 400
    flow = FlowConfig.objects.get()
    assert flow.schedule == "*/15 * * * *" and flow.description == ""


def test_list_is_paginated_and_filtered(api, owner, outsider):
    for n in range(3):
        FlowConfigFactory(flow_group="sales", flow_name=f"daily-{n}", owner=owner, description="revenue feed")
    FlowConfigFactory(flow_group="hr", flow_name="people", owner=outsider)
    everything = api.get("/api/flowconfigs").json()
    assert everything["count"] == 4 and len(everything["results"]) == 4
    assert api.get("/api/flowconfigs?flowGroup=hr").json()["count"] == 1
    assert api.get("/api/flowconfigs?owner=olivia").json()["count"] == 3
    assert api.get("/api/flowconfigs?q=revenue").json()["count"] == 3
    assert api.get("/api/flowconfigs?q=nothing-like-this").json()["count"] == 0


def test_listing_does_not_query_per_flow(api, owner, django_assert_max_num_queries):
    FlowConfigFactory.create_batch(20, owner=owner)
    with django_assert_max_num_queries(4):
        assert api.get("/api/flowconfigs").json()["count"] == 20


def test_strangers_are_not_let_in():
    anonymous = api_client_for(None)
    assert anonymous.get("/api/flowconfigs").status_code in (401, 403)
    assert anonymous.post("/api/flowconfigs", flow_body(), format="json").status_code in (401, 403)
    assert not FlowConfig.objects.exists()


def test_only_the_owner_or_staff_change_a_flow(owner, outsider, staff):
    FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner, properties=RUNNABLE)
    other = api_client_for(outsider)
    assert other.get("/api/flowconfigs/sales/orders").status_code == 200
    denied = other.patch("/api/flowconfigs/sales/orders", {"description": "mine now"}, format="json")
    assert denied.status_code == 403
    assert other.delete("/api/flowconfigs/sales/orders").status_code == 403
    assert FlowConfig.objects.get().description == ""

    admin = api_client_for(staff)
    assert (
        admin.patch("/api/flowconfigs/sales/orders", {"description": "fixed"}, format="json").status_code
        == 200
    )
    assert FlowConfig.objects.get().description == "fixed"


def test_an_unknown_flow_is_404(api):
    assert api.get("/api/flowconfigs/nope/nothing").status_code == 404


def test_catalog_listeners_hear_every_change(api):
    heard = []

    def listener(sender, action, flow, **kwargs):
        heard.append((action, str(flow)))

    flow_catalog_changed.connect(listener)
    try:
        api.post("/api/flowconfigs", flow_body(), format="json")
        api.patch("/api/flowconfigs/sales/orders", {"description": "x"}, format="json")
        api.delete("/api/flowconfigs/sales/orders")
    finally:
        flow_catalog_changed.disconnect(listener)
    assert heard == [("add", "sales/orders"), ("update", "sales/orders"), ("delete", "sales/orders")]


def test_a_listener_failure_saves_nothing(api):
    def broken(sender, **kwargs):
        raise RuntimeError("listener down")

    flow_catalog_changed.connect(broken)
    try:
        with pytest.raises(RuntimeError):
            api.post("/api/flowconfigs", flow_body(), format="json")
    finally:
        flow_catalog_changed.disconnect(broken)
    assert not FlowConfig.objects.exists()


def test_a_flow_without_a_schedule_runs_once_at_once(api):
    """Gobblin's run-once flow: no schedule means one execution, now (and again when it is saved
    again); created paused, it waits for Run now."""
    from portal.orchestration.models import FlowExecution

    assert api.post("/api/flowconfigs", flow_body(schedule=""), format="json").status_code == 201
    assert list(FlowExecution.objects.values_list("trigger", flat=True)) == ["RUN_IMMEDIATELY"]
    assert api.patch("/api/flowconfigs/sales/orders", {"description": "x"}, format="json").status_code == 200
    assert FlowExecution.objects.count() == 2
    assert api.post("/api/flowconfigs", flow_body(flowName="hourly"), format="json").status_code == 201
    assert FlowExecution.objects.count() == 2  # a scheduled flow waits for its ticks
    body = flow_body(flowName="later", schedule="", paused=True)
    assert api.post("/api/flowconfigs", body, format="json").status_code == 201
    assert FlowExecution.objects.count() == 2
