"""`manage.py load_demo` gives a new user a portal that works at once: the demo
flow compiles through the demo template pack, and the README's API example
(which names that pack's template) is accepted."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from portal.flows.models import FlowConfig
from portal.templatepacks.models import PackAuditEvent, TemplatePack

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.FLOWPORT_DATA_DIR = tmp_path / "data"
    call_command("load_demo", stdout=io.StringIO())


def test_the_demo_flow_compiles_through_the_demo_pack(demo):
    flow = FlowConfig.objects.get(flow_group="demo", flow_name="orders-to-archive")
    assert flow.template_uris == "pack://demo-pack/ingest/files.template"
    assert flow.compilation_status == "COMPILED", flow.compilation_message
    pack = TemplatePack.objects.get(name="demo-pack")
    assert set(pack.current_version.templates.values_list("path", flat=True)) == {"ingest/files.template"}
    assert PackAuditEvent.objects.filter(pack_name="demo-pack").count() == 2  # created, template added


def test_loading_the_demo_twice_changes_nothing(demo):
    call_command("load_demo", stdout=io.StringIO())
    assert TemplatePack.objects.get(name="demo-pack").versions.count() == 1
    assert FlowConfig.objects.count() == 1


def test_the_readmes_api_example_is_accepted(demo):
    api = APIClient()
    api.force_authenticate(FlowConfig.objects.get().owner)
    example = {
        "flowGroup": "mygroup",
        "flowName": "myflow1",
        "schedule": "0 */6 * * *",
        "templateUris": "pack://demo-pack/ingest/files.template",
        "source": "landing",
        "destinations": ["archive"],
        "properties": {"source.files.format": "csv"},
    }
    created = api.post("/api/flowconfigs", example, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["compilation"]["status"] == "COMPILED"
