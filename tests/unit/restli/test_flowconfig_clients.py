"""Gobblin's FlowConfigClient and FlowConfigV2Client, replayed request by
request as their code builds them (gobblin-flow-config-service-client): the
Rest.li request builders put the FlowId key with empty params in the URL,
X-RestLi-Method on every request, the record as the JSON body."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import Group

from portal.flows.models import FlowConfig
from portal.flows.schedules import next_run_times
from tests.builders.api import api_client_for
from tests.builders.forms import submit_as_rendered
from tests.builders.restli import RUNNABLE, Wire, flow_config
from tests.factories import UserFactory
from tests.unit.restli.pegasus import problems
from tests.unit.templatepacks.factories import make_pack

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("packs")]

V2_KEY = "/flowconfigsV2/($params:(),flowGroup:team,flowName:nightly)"
# FlowConfigV2Client.createFlowStatusId reads the execution id from the Location header so:
LOCATION_PARAMS = re.compile(r".*params:\((?P<flowStatusIdParams>.*?)\)")


def status_id_from_location(location: str) -> dict[str, str]:
    """What FlowConfigV2Client.createFlowStatusId does with the Location header."""
    match = LOCATION_PARAMS.match(location)
    assert match, location
    return dict(param.split(":") for param in match.group("flowStatusIdParams").split(","))


def test_v2_create_returns_the_entity_and_the_key_with_its_params(wire, topology):
    response = wire.send("POST", "/flowconfigsV2", flow_config(), "create")
    assert response.status_code == 201, response.content
    assert response["X-RestLi-Protocol-Version"] == "2.0.0"
    # Rest.li writes the key alone in X-RestLi-Id (encodeKeyForHeader); Location carries its params.
    assert response["X-RestLi-Id"] == "(flowGroup:team,flowName:nightly)"
    assert response["Location"].endswith(
        "/flowconfigsV2/($params:(flowExecutionId:-1,flowGroup:team,flowName:nightly),flowGroup:team,flowName:nightly)"
    )
    assert status_id_from_location(response["Location"]) == {
        "flowExecutionId": "-1",
        "flowGroup": "team",
        "flowName": "nightly",
    }
    entity = response.json()
    assert problems(entity, "FlowConfig") == []
    assert entity["schedule"] == {"cronSchedule": "0 0 2 * * ?", "runImmediately": False}  # as given
    flow = FlowConfig.objects.get(flow_group="team", flow_name="nightly")
    assert flow.schedule == "0 2 * * *" and flow.source == "pg-sales" and flow.destinations == ["lake"]


def test_a_run_once_flow_gets_its_execution_id_in_the_location(wire, topology):
    response = wire.send("POST", "/flowconfigsV2", flow_config(schedule=None), "create")
    assert response.status_code == 201, response.content
    params = status_id_from_location(response["Location"])
    flow = FlowConfig.objects.get(flow_group="team", flow_name="nightly")
    execution = flow.executions.get()
    assert params["flowExecutionId"] == str(execution.execution_id)
    assert "schedule" not in response.json()


def test_create_twice_is_a_409(wire):
    wire.send("POST", "/flowconfigsV2", flow_config(), "create")
    again = wire.send("POST", "/flowconfigsV2", flow_config(), "create")
    assert again.status_code == 409
    assert "already exists" in again.json()["message"]


def test_get_reads_the_record_back_in_both_key_forms(wire):
    wire.send("POST", "/flowconfigsV2", flow_config(), "create")
    with_params = wire.send("GET", V2_KEY, restli_method="get")
    without = wire.send("GET", "/flowconfigsV2/(flowGroup:team,flowName:nightly)")
    encoded = wire.send("GET", "/flowconfigsV2/(%24params:(),flowGroup:team,flowName:nightly)")
    whole = wire.send(
        "GET", "/flowconfigsV2/%28%24params%3A%28%29%2CflowGroup%3Ateam%2CflowName%3Anightly%29"
    )
    assert with_params.status_code == 200, with_params.content
    assert with_params.json() == without.json() == encoded.json() == whole.json()
    assert problems(with_params.json(), "FlowConfig") == []


def test_update_replaces_the_config(wire):
    wire.send("POST", "/flowconfigsV2", flow_config(), "create")
    properties = {**flow_config()["properties"], "a": "b"}
    changed = flow_config(properties=properties, schedule={"cronSchedule": "0 0/30 * * * ?"})
    response = wire.send("PUT", V2_KEY, changed, "update")
    assert response.status_code == 200, response.content
    record = wire.send("GET", V2_KEY).json()
    assert record["properties"] == properties
    assert record["schedule"]["cronSchedule"] == "0 0/30 * * * ?"


def test_update_cannot_change_the_key(wire):
    wire.send("POST", "/flowconfigsV2", flow_config(), "create")
    renamed = flow_config(id={"flowGroup": "team", "flowName": "other"})
    response = wire.send("PUT", V2_KEY, renamed, "update")
    assert response.status_code == 400
    assert response.json()["message"] == "flowName and flowGroup cannot be changed in update"


def test_partial_update_applies_a_restli_patch(wire):
    wire.send("POST", "/flowconfigsV2", flow_config(), "create")
    patch = {"patch": {"schedule": {"$set": {"runImmediately": True}}, "properties": {"$set": {"x": "1"}}}}
    response = wire.send("POST", V2_KEY, patch, "partial_update")
    assert response.status_code == 200, response.content
    record = wire.send("GET", V2_KEY).json()
    assert record["schedule"] == {"cronSchedule": "0 0 2 * * ?", "runImmediately": True}
    assert record["properties"]["x"] == "1"
    assert FlowConfig.objects.get(flow_name="nightly").executions.count() == 1  # runImmediately ran it


def test_a_broken_patch_is_a_400_and_changes_nothing(wire):
    wire.send("POST", "/flowconfigsV2", flow_config(), "create")
    response = wire.send("POST", V2_KEY, {"patch": {"$set": ["not", "a", "map"]}}, "partial_update")
    assert response.status_code == 400
    assert "Failed to apply patch" in response.json()["message"]


def test_get_all_and_paging(wire):
    for name in ("a", "b", "c"):
        wire.send("POST", "/flowconfigsV2", flow_config(id={"flowGroup": "team", "flowName": name}), "create")
    everything = wire.send("GET", "/flowconfigsV2", restli_method="get_all").json()
    assert [e["id"]["flowName"] for e in everything["elements"]] == ["a", "b", "c"]
    page = wire.send("GET", "/flowconfigsV2?start=1&count=1", restli_method="get_all").json()
    assert [e["id"]["flowName"] for e in page["elements"]] == ["b"]
    assert page["paging"]["start"] == 1 and page["paging"]["count"] == 1
    assert page["paging"]["links"][0]["rel"] == "next"
    following = wire.send("GET", page["paging"]["links"][0]["href"], restli_method="get_all").json()
    assert [e["id"]["flowName"] for e in following["elements"]] == ["c"]
    assert following["paging"]["links"] == []
    finder = "/flowconfigsV2?q=filterFlows&flowGroup=team&count=2"
    first = wire.send("GET", finder, restli_method="finder").json()
    second = wire.send("GET", first["paging"]["links"][0]["href"], restli_method="finder").json()
    assert [e["id"]["flowName"] for e in first["elements"] + second["elements"]] == ["a", "b", "c"]


def test_the_filter_flows_finder(wire):
    wire.send("POST", "/flowconfigsV2", flow_config(), "create")
    files = {
        "gobblin.flow.sourceIdentifier": "lake",
        "gobblin.flow.destinationIdentifier": "archive",
        "source.files.format": "parquet",
    }
    other = flow_config(
        id={"flowGroup": "other", "flowName": "x"}, properties={"user.to.proxy": "svc", **files}
    )
    wire.send("POST", "/flowconfigsV2", other, "create")

    def names(query: str) -> list[str]:
        response = wire.send("GET", f"/flowconfigsV2?q=filterFlows&{query}", restli_method="finder")
        assert response.status_code == 200, response.content
        return [e["id"]["flowName"] for e in response.json()["elements"]]

    assert names("flowGroup=team") == ["nightly"]
    # Ordered by flowGroup, then flowName.
    assert names("templateUri=FS%3A%2F%2F%2Fmytemplate.template") == ["x", "nightly"]
    assert names("userToProxy=svc") == ["x"]
    assert names("sourceIdentifier=pg-sales") == ["nightly"]
    assert names("destinationIdentifier=lake") == ["nightly"]
    assert names("schedule=0%200%202%20*%20*%20%3F") == ["x", "nightly"]
    assert names("propertyFilter=user.to.proxy") == ["x"]
    assert names("propertyFilter=gobblin.flow.sourceIdentifier%3Dpg") == ["nightly"]
    assert names("isRunImmediately=true") == []


def test_run_immediately_action_triggers_an_execution(wire):
    wire.send("POST", "/flowconfigsV2", flow_config(), "create")
    response = wire.send("POST", f"{V2_KEY}?action=runImmediately", {}, "action")
    assert response.status_code == 200, response.content
    assert response.json() == {"value": "Successfully triggered flow {flowGroup=team, flowName=nightly}"}
    assert FlowConfig.objects.get(flow_name="nightly").executions.count() == 1


def test_delete_with_the_state_store_header(wire):
    wire.send("POST", "/flowconfigsV2", flow_config(), "create")
    response = wire.send(
        "DELETE", V2_KEY, restli_method="delete", headers={"HTTP_DELETE.STATE.STORE": "true"}
    )
    assert response.status_code == 200
    assert not FlowConfig.objects.filter(flow_name="nightly").exists()
    assert wire.send("GET", V2_KEY).status_code == 404


def test_v1_client_create_get_update_delete(wire):
    created = wire.send("POST", "/flowconfigs", flow_config(), "create")
    assert created.status_code == 201 and created.content == b""
    key = "/flowconfigs/($params:(),flowGroup:team,flowName:nightly)"
    got = wire.send("GET", key, restli_method="get")
    assert problems(got.json(), "FlowConfig") == []
    properties = {**flow_config()["properties"], "p": "q"}
    assert wire.send("PUT", key, flow_config(properties=properties), "update").status_code == 200
    assert wire.send("GET", key).json()["properties"] == properties
    assert wire.send("DELETE", key, restli_method="delete").status_code == 200


def test_v1_refuses_explain_as_gobblin_does(wire):
    response = wire.send("POST", "/flowconfigs", flow_config(explain=True), "create")
    assert response.status_code == 400
    assert response.json()["message"] == "FlowConfig with explain not supported."


# --- Gobblin's semantics -----------------------------------------------------------------


def test_explain_compiles_and_stores_nothing(wire, topology):
    response = wire.send("POST", "/flowconfigsV2", flow_config(explain=True), "create")
    assert response.status_code == 200, response.content
    record = response.json()
    assert record["explain"] is True
    assert problems(record, "FlowConfig") == []
    import json

    plan = json.loads(record["properties"]["gobblin.flow.compiled"])
    assert plan["flowName"] == "nightly" and plan["source"] == "pg-sales"
    assert plan["jobs"][0]["executor"] == "ingest"
    assert not FlowConfig.objects.filter(flow_name="nightly").exists()


def test_a_user_set_flow_execution_id_is_refused(wire):
    body = flow_config(properties={"flow.executionId": "123"})
    response = wire.send("POST", "/flowconfigsV2", body, "create")
    assert response.status_code == 400
    assert response.json()["message"] == "flow.executionId cannot be set by the user"
    assert not FlowConfig.objects.exists()


def test_flow_unschedule_sets_the_never_run_schedule(wire):
    wire.send("POST", "/flowconfigsV2", flow_config(), "create")
    response = wire.send("PUT", V2_KEY, flow_config(properties={"flow.unschedule": "true"}), "update")
    assert response.status_code == 200, response.content
    record = wire.send("GET", V2_KEY).json()
    assert record["schedule"]["cronSchedule"] == "0 0 0 ? 1 1 2050"
    assert record["properties"]["gobblin.flow.sourceIdentifier"] == "pg-sales"  # the rest is untouched
    assert FlowConfig.objects.get(flow_name="nightly").schedule == "0 0 * 1 0 0 2050"


@pytest.mark.parametrize("cron", ["0 0 0 ? 1 1 2050", "0 0 12 ? * 2-6 2030-2032", "0 15 10 ? * MON-FRI"])
def test_a_schedule_reads_back_as_it_was_given(wire, owner, client, cron):
    response = wire.send("POST", "/flowconfigsV2", flow_config(schedule={"cronSchedule": cron}), "create")
    assert response.status_code == 201, response.content
    assert wire.send("GET", V2_KEY).json()["schedule"]["cronSchedule"] == cron
    client.force_login(owner)  # and the flow's page shows it
    page = client.get("/flows/team/nightly/")
    assert page.status_code == 200


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (flow_config(schedule={"cronSchedule": "every day"}), "/schedule/cronSchedule"),
        (flow_config(templateUris="http://x/y.template"), "/templateUris"),
        (flow_config(templateUris="FS:///mytemplate.template,FILE://bad/uri"), "/templateUris"),
        (flow_config(templateUris="FS:///nowhere.template"), None),
        (flow_config(id={"flowGroup": "team", "flowName": "n" * 129}), "/id/flowName"),
        (flow_config(id={"flowGroup": ""}), "/id/flowName"),
        (flow_config(properties={"n": 1}), "/properties/n"),
        ({k: v for k, v in flow_config().items() if k != "templateUris"}, "/templateUris"),
    ],
)
def test_schema_violations_are_422_naming_the_field(wire, body, path):
    response = wire.send("POST", "/flowconfigsV2", body, "create")
    if path is None:  # a well-formed template URI Flowport cannot read: the handler's 400
        assert response.status_code == 400, response.content
        assert response.json()["message"].startswith("/templateUris: FS:///nowhere.template: no template")
        return
    assert response.status_code == 422, response.content
    assert response["X-RestLi-Error-Response"] == "true"
    assert f"ERROR :: {path} ::" in response.json()["message"]
    assert not FlowConfig.objects.exists()


def test_owning_group_lets_its_members_edit_and_only_members_may_set_it(owner, wire):
    team = Group.objects.create(name="data-eng")
    owner.groups.add(team)
    teammate = UserFactory(username="tara")
    teammate.groups.add(team)
    outsider = UserFactory(username="oscar")

    refused = Wire(outsider).send("POST", "/flowconfigsV2", flow_config(owningGroup="data-eng"), "create")
    assert refused.status_code == 403
    assert "owning group" in refused.json()["message"]

    created = wire.send("POST", "/flowconfigsV2", flow_config(owningGroup="data-eng"), "create")
    assert created.status_code == 201 and created.json()["owningGroup"] == "data-eng"

    changed = flow_config(owningGroup="data-eng", properties={**flow_config()["properties"], "by": "tara"})
    assert Wire(teammate).send("PUT", V2_KEY, changed, "update").status_code == 200
    assert Wire(outsider).send("PUT", V2_KEY, changed, "update").status_code == 403
    # The same access rule holds under /api/: it is the catalog's, not this layer's.
    assert (
        api_client_for(teammate)
        .patch("/api/flowconfigs/team/nightly", {"description": "x"}, format="json")
        .status_code
        == 200
    )
    assert api_client_for(outsider).delete("/api/flowconfigs/team/nightly").status_code == 403
    assert Wire(outsider).send("DELETE", V2_KEY).status_code == 403
    assert Wire(teammate).send("DELETE", V2_KEY).status_code == 200


def test_anyone_signed_in_reads_but_only_the_owner_changes(wire):
    wire.send("POST", "/flowconfigsV2", flow_config(), "create")
    outsider = Wire(UserFactory(username="oscar"))
    assert outsider.send("GET", V2_KEY).status_code == 200
    denied = outsider.send("POST", f"{V2_KEY}?action=runImmediately", {}, "action")
    assert denied.status_code == 403 and denied["X-RestLi-Error-Response"] == "true"


def test_protocol_1_is_refused_with_a_clear_error(wire):
    response = wire.send("GET", V2_KEY, headers={"HTTP_X_RESTLI_PROTOCOL_VERSION": "1.0.0"})
    assert response.status_code == 400
    assert "2.0.0" in response.json()["message"]


def test_a_broken_key_is_a_400(wire):
    response = wire.send("GET", "/flowconfigsV2/(flowGroup:team,flowName:nightly")
    assert response.status_code == 400
    assert "Invalid key" in response.json()["message"]


def test_a_multi_hop_gobblin_template_with_an_optional_substitution_compiles(owner, wire, topology):
    """Gobblin's multi-hop distcp template uses ${?…subPaths} under a path the
    flow's own gobblin.flow.* properties also fill: it compiles (it used to fail
    with "No configuration setting found for key flow")."""
    import json
    from pathlib import Path

    from tests.unit.templatepacks.factories import make_pack

    template = Path(__file__).parents[1] / "templatepacks/gobblin_templates/multihop/distcp.template"
    # As a team moving it over adapts it: Flowport sets the publish folder and the
    # job name from the flow's data nodes, and runs no Java classes (docs/security.md).
    portal_owned = (
        "data.publisher.final.dir",
        "job.name",
        "source.class",
        "writer.builder.class",
        "converter.classes",
        # Gobblin's work folder names flow.executionId, which Flowport never sets (it keeps each
        # job's work folder itself): left in, the flow could never run, and its save is refused.
        "work.dir",
    )
    adapted = "\n".join(
        line for line in template.read_text().splitlines() if not line.startswith(portal_owned)
    )
    make_pack(owner, "multihop", {"jobTemplates/distcp.template": adapted})
    properties = {
        **flow_config()["properties"],
        "gobblin.flow.edge.input.dataset.descriptor.path": "/in",
        "gobblin.flow.edge.output.dataset.descriptor.path": "/out",
        "source.data.node.fs.uri": "hdfs://src:8020",
        "destination.data.node.fs.uri": "hdfs://dst:8020",
        "user.to.proxy": "alice",
    }
    body = flow_config(templateUris="pack://multihop/jobTemplates/distcp.template", properties=properties)
    explained = wire.send("POST", "/flowconfigsV2", {**body, "explain": True}, "create")
    assert explained.status_code == 200, explained.content
    job = json.loads(explained.json()["properties"]["gobblin.flow.compiled"])["jobs"][0]
    assert job["properties"]["gobblin.dataset.pattern"] == "/in/"
    assert job["properties"]["writer.fs.uri"] == "hdfs://dst:8020"
    assert not [error for error in job["errors"] if "substitution" in error], job["errors"]
    assert job["errors"] == [], job["errors"]
    created = wire.send("POST", "/flowconfigsV2", body, "create")
    assert created.status_code == 201, created.content


def test_an_oversized_body_is_a_restli_413(wire, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = flow_config(properties={"big": "x" * 2000})
    response = wire.send("POST", "/flowconfigsV2", body, "create")
    assert response.status_code == 413
    assert response["X-RestLi-Error-Response"] == "true"
    assert not FlowConfig.objects.exists()


def test_a_name_flowport_does_not_allow_is_a_400_naming_the_record_field(wire):
    response = wire.send(
        "POST", "/flowconfigsV2", flow_config(id={"flowGroup": "team", "flowName": "my flow"}), "create"
    )
    assert response.status_code == 400
    assert response.json()["message"].startswith("/id/flowName: Use 1-128 letters")


# --- what still differed on the wire ----------------------------------------------------


def test_the_id_header_carries_the_key_alone_as_rest_li_writes_it(wire):
    """FlowConfigClient.createFlowConfig (v1): X-RestLi-Id is encodeKeyForHeader's key, no params."""
    created = wire.send("POST", "/flowconfigs", flow_config(), "create")
    assert created.status_code == 201, created.content
    assert created["X-RestLi-Id"] == "(flowGroup:team,flowName:nightly)"
    assert created["Location"].endswith("/flowconfigs/($params:(),flowGroup:team,flowName:nightly)")
    # The header's key reads back as the flow's key, and fetches it.
    assert wire.send("GET", f"/flowconfigs/{created['X-RestLi-Id']}").json()["id"] == {
        "flowGroup": "team",
        "flowName": "nightly",
    }
    explained = wire.send(
        "POST",
        "/flowconfigsV2",
        flow_config(id={"flowGroup": "team", "flowName": "x"}, explain=True),
        "create",
    )
    assert explained["X-RestLi-Id"] == "(flowGroup:team,flowName:x)"


def test_gobblins_own_test_schedule_runs_at_minute_one_of_every_hour(wire):
    """FlowConfigsV2Test.testCreate's schedule, `0 1/0 * ? * *`: Quartz 2.2.3 reads the
    increment 0 as "minute 1 alone"."""
    body = flow_config(schedule={"cronSchedule": "0 1/0 * ? * *", "runImmediately": True})
    response = wire.send("POST", "/flowconfigsV2", body, "create")
    assert response.status_code == 201, response.content
    assert response.json()["schedule"] == {"cronSchedule": "0 1/0 * ? * *", "runImmediately": True}
    flow = FlowConfig.objects.get(flow_name="nightly")
    assert flow.schedule == "1 * * * *"
    assert {moment.minute for moment in next_run_times(flow.schedule, count=3)} == {1}
    assert flow.executions.count() == 1  # runImmediately


def test_a_template_uri_of_another_scheme_is_a_422_as_gobblins_validator_answers(wire):
    """FlowConfigsV2Test.testCreateBadTemplateUri: the schema's TemplateUriValidator refuses it."""
    body = flow_config(
        templateUris="FILE://bad/uri", schedule={"cronSchedule": "0 1/0 * ? * *", "runImmediately": True}
    )
    response = wire.send("POST", "/flowconfigsV2", body, "create")
    assert response.status_code == 422, response.content
    assert response.json()["message"] == (
        "Input field validation failure, reason: "
        'ERROR :: /templateUris :: "FILE://bad/uri" is not a well-formed comma-separated list of URIs\n'
    )
    # With another schema problem, one 422 names both.
    both = wire.send("POST", "/flowconfigsV2", {**body, "properties": {"n": 1}}, "create")
    assert both.status_code == 422
    assert "ERROR :: /properties/n ::" in both.json()["message"]
    assert "ERROR :: /templateUris ::" in both.json()["message"]
    assert not FlowConfig.objects.exists()


def test_a_quartz_schedule_saved_through_the_api_or_the_form_reads_back_as_given(wire, owner, client):
    api = api_client_for(owner)
    body = {
        "flowGroup": "team",
        "flowName": "nightly",
        "schedule": "0 0/5 * * * ?",
        "templateUris": "FS:///mytemplate.template",
        "source": "pg-sales",
        "destinations": ["lake"],
        "properties": RUNNABLE,
    }
    assert api.post("/api/flowconfigs", body, format="json").status_code == 201
    assert wire.send("GET", V2_KEY).json()["schedule"]["cronSchedule"] == "0 0/5 * * * ?"
    # An /api client sending back what it read (the unix form) leaves the schedule as given…
    read = api.get("/api/flowconfigs/team/nightly").json()
    assert read["schedule"] == "0/5 * * * *"
    assert (
        api.put("/api/flowconfigs/team/nightly", {**read, "description": "x"}, format="json").status_code
        == 200
    )
    assert wire.send("GET", V2_KEY).json()["schedule"]["cronSchedule"] == "0 0/5 * * * ?"
    # …and a new schedule is kept as it is written now.
    api.patch("/api/flowconfigs/team/nightly", {"schedule": "0 0 3 ? * MON-FRI"}, format="json")
    assert wire.send("GET", V2_KEY).json()["schedule"]["cronSchedule"] == "0 0 3 ? * MON-FRI"

    # The form: a new flow with a Quartz schedule, then an edit that leaves the schedule alone.
    client.force_login(owner)
    created = client.post(
        "/flows/new/",
        {
            "flow_group": "team",
            "flow_name": "hourly",
            "source": "pg-sales",
            "destinations": ["lake"],
            "template_uris": "FS:///mytemplate.template",
            "schedule": "0 15 * ? * *",
            "prop-0-key": "source.jdbc.tables",
            "prop-0-value": "orders",
            "prop-1-key": "extract.is.full",
            "prop-1-value": "true",
        },
    )
    assert created.status_code == 302, created.content.decode()[-3000:]
    hourly = "/flowconfigsV2/(flowGroup:team,flowName:hourly)"
    assert wire.send("GET", hourly).json()["schedule"]["cronSchedule"] == "0 15 * ? * *"
    edited = submit_as_rendered(client, "/flows/team/hourly/edit/", description="edited")
    assert edited.status_code == 302
    assert FlowConfig.objects.get(flow_name="hourly").description == "edited"
    assert wire.send("GET", hourly).json()["schedule"]["cronSchedule"] == "0 15 * ? * *"


def test_templates_that_inherit_each_other_are_resolved_as_gobblin_resolves_them(owner, wire):
    """InheritingJobTemplate: a loop of parents counts each template once; the flow compiles."""
    make_pack(
        owner,
        "looped",
        {
            "a.template": 'gobblin.template.inherit = "b.template"\nextract.is.full = "true"',
            "b.template": 'gobblin.template.inherit = "a.template"\nsource.jdbc.tables = orders',
        },
    )
    body = flow_config(
        templateUris="pack://looped/a.template",
        properties={
            "gobblin.flow.sourceIdentifier": "pg-sales",
            "gobblin.flow.destinationIdentifier": "lake",
        },
    )
    explained = wire.send("POST", "/flowconfigsV2", {**body, "explain": True}, "create")
    assert explained.status_code == 200, explained.content
    job = json.loads(explained.json()["properties"]["gobblin.flow.compiled"])["jobs"][0]
    assert job["properties"]["source.jdbc.tables"] == "orders" and job["errors"] == []
    assert wire.send("POST", "/flowconfigsV2", body, "create").status_code == 201
