"""`GET /api/flowconfigs/{group}/{name}/jobs` and the dry-run compile."""

from __future__ import annotations

import pytest

from portal.flows.models import FlowConfig
from tests.builders.api import api_client_for
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db

FLOW = {
    "flowGroup": "demo",
    "flowName": "f",
    "source": "landing",
    "destinations": ["archive"],
    "properties": {"source.files.format": "csv"},
}


@pytest.fixture
def demo_topology():
    nodes("landing", "lake", "archive")
    executor("ingest", "landing>lake")
    executor("replicate", "lake>archive")


def test_created_flow_reports_compilation_and_its_jobs(api, demo_topology):
    created = api.post("/api/flowconfigs", FLOW, format="json")
    assert created.status_code == 201
    assert created.json()["compilation"] == {
        "status": "COMPILED",
        "message": "2 jobs: landing → lake on ingest; lake → archive on replicate",
        "refreshing": False,
    }
    jobs = api.get("/api/flowconfigs/demo/f/jobs").json()
    assert jobs["status"] == "COMPILED"
    assert jobs["executors"] == ["ingest", "replicate"]
    assert [(j["jobName"], j["parents"], j["queue"]) for j in jobs["jobs"]] == [
        ("demo.f.1-landing-to-lake", [], "executor.ingest"),
        ("demo.f.2-lake-to-archive", ["demo.f.1-landing-to-lake"], "executor.replicate"),
    ]
    assert jobs["compiledAt"]


def test_pending_flow_jobs_say_why(api):
    nodes("landing", "archive")
    assert api.post("/api/flowconfigs", FLOW, format="json").json()["compilation"]["status"] == "PENDING"
    jobs = api.get("/api/flowconfigs/demo/f/jobs").json()
    assert jobs["jobs"] == []
    assert jobs["pendingReasons"] == [
        "landing → archive: missing hop out of landing (no enabled executor reads from it)"
    ]
    assert api.get("/api/flowconfigs/demo/nope/jobs").status_code == 404


def test_dry_run_compiles_without_saving(api, demo_topology):
    response = api.post(
        "/api/flowconfigs/compile",
        {**FLOW, "properties": {"source.files.format": "csv", "k": "v"}},
        format="json",
    )
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "COMPILED"
    assert body["jobs"][1]["properties"]["k"] == "v"
    assert body["jobs"][1]["properties"]["flowport.hop.destination.path"] == "var/data/archive"
    assert not FlowConfig.objects.exists()


def test_dry_run_of_a_flow_the_pipeline_would_refuse_is_not_compiled(api, demo_topology):
    """The preview says what the save and the worker say, not "compiled"."""
    for properties, problem in (
        ({}, "missing required property 'source.files.format'"),
        (
            {"source.files.format": "xml"},
            "unknown value 'xml' in 'source.files.format' (supported: avro, csv, json, jsonl, orc, parquet)",
        ),
    ):
        body = api.post("/api/flowconfigs/compile", {**FLOW, "properties": properties}, format="json").json()
        assert body["status"] == "FAILED"
        assert problem in body["errors"]
        assert problem in body["message"]
        refused = api.post("/api/flowconfigs", {**FLOW, "properties": properties}, format="json")
        assert refused.status_code == 400
        assert refused.json() == {"properties": [problem]}


def test_dry_run_of_a_flow_with_a_secret_in_clear_fails_as_its_save_is_refused(api, demo_topology):
    """A password typed in clear: the save refuses it (flows.secrets), so the dry run, asked
    the same question, answers FAILED with the save's own words, never "compiled"."""
    flow = {**FLOW, "properties": {"source.files.format": "csv", "target.password": "hunter2"}}
    refused = api.post("/api/flowconfigs", flow, format="json")
    assert refused.status_code == 400
    (problem,) = refused.json()["properties"]
    body = api.post("/api/flowconfigs/compile", flow, format="json").json()
    assert body["status"] == "FAILED"
    assert problem in body["errors"]
    assert "hunter2" not in str(body)
    assert not FlowConfig.objects.exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schedule": "61 * * * *"}, "schedule"),
        ({"destinations": "lake"}, "destinations"),
        ({"flowName": ""}, "flowName"),
    ],
)
def test_dry_run_bad_input_is_400_with_the_field(api, change, field):
    response = api.post("/api/flowconfigs/compile", {**FLOW, **change}, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not FlowConfig.objects.exists()


def test_compile_endpoints_need_a_signed_in_user(demo_topology):
    anonymous = api_client_for(None)
    assert anonymous.post("/api/flowconfigs/compile", FLOW, format="json").status_code in (401, 403)
    assert anonymous.get("/api/flowconfigs/demo/f/jobs").status_code in (401, 403)


def test_flow_form_compile_preview_fragment_saves_nothing(owner, demo_topology):
    from django.test import Client

    client = Client()
    client.force_login(owner)
    form = {
        "flow_group": "demo",
        "flow_name": "f",
        "source": "landing",
        "destinations_text": "archive",
        "properties_text": "source.files.format=json",
    }
    response = client.post("/flows/new/?part=compile", form, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert "demo.f.2-lake-to-archive" in html and "executor.replicate" in html
    bad = client.post("/flows/new/?part=compile", {**form, "schedule": "61 * * * *"}, HTTP_HX_REQUEST="true")
    assert 'class="errors"' in bad.content.decode()
    assert not FlowConfig.objects.exists()
