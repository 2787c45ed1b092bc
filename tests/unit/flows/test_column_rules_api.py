"""Column rules sent through /api/flowconfigs and Gobblin's Rest.li path: the flow gets its owner's
wrapped customer key as the form's picker gives it (one save path, flows.secrets), or the save
says to add one."""

from __future__ import annotations

import pytest

from portal.crypto.master import create_ring_file
from portal.flows.models import FlowConfig
from portal.keys import services as keys
from tests.builders.flows import RUNNABLE, flow_body, nodes, packs  # noqa: F401 - autouse fixtures
from tests.builders.restli import Wire

pytestmark = pytest.mark.django_db

WRAPPED = "encrypt.wrapped.key"


@pytest.fixture
def master_key(settings, tmp_path):
    create_ring_file(tmp_path / "master-key")
    settings.FLOWPORT_MASTER_KEY_FILE, settings.FLOWPORT_MASTER_KEY = str(tmp_path / "master-key"), ""


def owners_key(owner):
    return keys.wrap_customer_key(user=owner, generate=True, label="main").customer_key.wrapped_key


def test_an_encrypt_rule_without_a_customer_key_is_refused_saying_to_add_one(api):
    body = flow_body(properties={**RUNNABLE, "columns.encrypt": "ssn"})
    refused = api.post("/api/flowconfigs", body, format="json")
    assert refused.status_code == 400, refused.content
    assert "add a customer key under Keys first" in " ".join(refused.json()["properties"])
    assert not FlowConfig.objects.exists()


def test_the_api_adds_the_owners_key_to_an_encrypt_rule_as_the_form_does(api, owner, master_key):
    wrapped = owners_key(owner)
    body = flow_body(properties={**RUNNABLE, "columns.encrypt": "ssn", "columns.drop": "note"})
    created = api.post("/api/flowconfigs", body, format="json")
    assert created.status_code == 201, created.content
    assert FlowConfig.objects.get().properties[WRAPPED] == wrapped
    assert created.json()["properties"][WRAPPED] == wrapped  # wrapped by the master key: no secret


def test_a_hash_rule_added_by_patch_gets_the_key_and_a_put_without_it_keeps_it(api, owner, master_key):
    assert api.post("/api/flowconfigs", flow_body(), format="json").status_code == 201
    assert WRAPPED not in FlowConfig.objects.get().properties  # no rule, no key
    wrapped = owners_key(owner)

    patched = api.patch(
        "/api/flowconfigs/sales/orders", {"properties": {**RUNNABLE, "columns.hash": "email"}}, format="json"
    )
    assert patched.status_code == 200, patched.content
    assert FlowConfig.objects.get().properties[WRAPPED] == wrapped

    keys.wrap_customer_key(user=owner, generate=True, label="newer")  # the flow keeps the one it has
    put = api.put(
        "/api/flowconfigs/sales/orders",
        flow_body(properties={**RUNNABLE, "columns.hash": "email"}),
        format="json",
    )
    assert put.status_code == 200, put.content
    assert FlowConfig.objects.get().properties[WRAPPED] == wrapped


def test_gobblins_restli_create_gets_the_key_too(owner, master_key):
    wrapped = owners_key(owner)
    record = {
        "id": {"flowGroup": "team", "flowName": "nightly"},
        "schedule": {"cronSchedule": "0 0 2 * * ?", "runImmediately": False},
        "templateUris": "FS:///mytemplate.template",
        "properties": {
            "gobblin.flow.sourceIdentifier": "pg-orders",
            "gobblin.flow.destinationIdentifier": "lake",
            **RUNNABLE,
            "columns.encrypt": "ssn",
        },
    }
    response = Wire(owner).send("POST", "/flowconfigsV2", record, "create")
    assert response.status_code == 201, response.content
    assert FlowConfig.objects.get(flow_group="team", flow_name="nightly").properties[WRAPPED] == wrapped
