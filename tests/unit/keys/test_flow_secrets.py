"""Flows with secrets through `/api/flowconfigs`: ENC(...) values need their
wrapped customer key, templates' encrypted_attributes must not be given in
clear, and every refusal is a 400 naming the property — with nothing saved."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from portal.crypto import client, wrapping
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, decrypt_properties
from portal.crypto.master import new_ring
from portal.flows import services as flow_services
from portal.flows.compiler import compile_flow
from portal.flows.models import FlowConfig
from portal.keys import services
from portal.templatepacks import services as packs
from tests.builders.api import api_client_for
from tests.builders.keys import SECRET, flip_byte
from tests.factories import FlowConfigFactory
from tests.unit.templatepacks.factories import make_pack
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db

PARENT = """
gobblin.template.encrypted_attributes = "source.conn.password"
writer.output.format = parquet
"""
CHILD = """
gobblin.template.inherit = "pack://vault/base.template"
gobblin.template.encrypted_attributes = [writer.jdbc.password]
gobblin.template.required_attributes = "source.conn.password"
"""
TEMPLATE = "pack://vault/ingest.template"


# What the JDBC source reads besides the secrets (a save refuses a flow the pipeline would refuse).
RUNNABLE = {"source.jdbc.tables": "orders", "extract.is.full": "true"}


@pytest.fixture(autouse=True)
def topology(db):
    nodes("db", kind="jdbc")
    nodes("lake")
    executor("x1", "db>lake")


@pytest.fixture(autouse=True)
def vault(owner):
    return make_pack(owner, "vault", {"base.template": PARENT, "ingest.template": CHILD})


def body(properties: dict[str, str], **overrides) -> dict:
    return {
        "flowGroup": "sales",
        "flowName": "orders",
        "templateUris": TEMPLATE,
        "properties": {**RUNNABLE, **properties},
        "source": "db",
        "destinations": ["lake"],
        **overrides,
    }


def post(api, properties: dict[str, str], **overrides):
    return api.post("/api/flowconfigs", body(properties, **overrides), format="json")


def assert_refused(response, *words: str) -> list[str]:
    assert response.status_code == 400, response.content
    messages = response.json()["properties"]
    text = " ".join(messages)
    for word in words:
        assert word in text, messages
    assert SECRET not in response.content.decode()
    assert not FlowConfig.objects.exists()
    return messages


def test_a_flow_with_encrypted_secrets_is_saved_and_its_job_decrypts(api, stored_key, customer_key):
    properties = {
        "source.conn.password": services.encrypt_value(stored_key.wrapped_key, SECRET),
        "writer.jdbc.password": client.encrypt(customer_key, "w-" + SECRET),  # made on the customer's side
        WRAPPED_KEY_PROPERTY: stored_key.wrapped_key,
    }
    response = post(api, properties)
    assert response.status_code == 201, response.content
    assert SECRET not in response.content.decode()
    flow = FlowConfig.objects.get()
    assert SECRET not in str(flow.properties)

    compiled = compile_flow(flow)
    assert compiled.status == "COMPILED", compiled.message
    [job] = compiled.jobs
    plain = decrypt_properties(job.properties)
    assert plain["source.conn.password"] == SECRET
    assert plain["writer.jdbc.password"] == "w-" + SECRET
    assert plain["writer.output.format"] == "parquet"
    # What the worker hides in its logs: each decrypted secret, nothing else.
    assert services.secret_values(job.properties, plain) == {SECRET, "w-" + SECRET}


@pytest.mark.parametrize("attribute", ["source.conn.password", "writer.jdbc.password"])
def test_an_encrypted_attribute_given_in_clear_is_refused_naming_it(api, stored_key, attribute):
    """Declared by the template itself or by its parent."""
    other = ({"source.conn.password", "writer.jdbc.password"} - {attribute}).pop()
    properties = {
        attribute: SECRET,
        other: services.encrypt_value(stored_key.wrapped_key, "fine"),
        WRAPPED_KEY_PROPERTY: stored_key.wrapped_key,
    }
    [message] = assert_refused(post(api, properties), repr(attribute), "declared encrypted", "given in clear")
    assert "gobblin.template.encrypted_attributes" in message


def test_an_encrypted_attribute_in_clear_is_refused_without_any_wrapped_key(api, master_key_file):
    assert_refused(post(api, {"source.conn.password": SECRET}), "'source.conn.password'", "given in clear")


def test_a_flow_cannot_override_a_templates_encrypted_attributes_away(api, master_key_file):
    properties = {"source.conn.password": SECRET, "gobblin.template.encrypted_attributes": ""}
    assert_refused(post(api, properties), "'source.conn.password'", "given in clear")


def test_a_flow_may_declare_its_own_encrypted_attributes(api, master_key_file):
    properties = {"my.secret": SECRET, "gobblin.template.encrypted_attributes": "my.secret"}
    assert_refused(post(api, properties, templateUris=""), "'my.secret'", "given in clear")


def test_the_compiler_reports_a_clear_encrypted_attribute_too(owner, master_key_file):
    flow = FlowConfigFactory.build(
        owner=owner, source="db", template_uris=TEMPLATE, properties={"writer.jdbc.password": SECRET}
    )
    compiled = compile_flow(flow)
    assert compiled.status == "FAILED"
    [job] = compiled.jobs
    assert any("'writer.jdbc.password' is declared encrypted" in error for error in job.errors)
    assert all(SECRET not in error for error in job.errors)


def test_an_update_is_checked_like_a_create(api, stored_key):
    good = {
        **RUNNABLE,
        "source.conn.password": services.encrypt_value(stored_key.wrapped_key, SECRET),
        WRAPPED_KEY_PROPERTY: stored_key.wrapped_key,
    }
    assert post(api, good).status_code == 201
    response = api.patch(
        "/api/flowconfigs/sales/orders",
        {"properties": {**good, "source.conn.password": SECRET}},
        format="json",
    )
    assert response.status_code == 400 and "'source.conn.password'" in response.json()["properties"][0]
    assert FlowConfig.objects.get().properties == good


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda p, w: {"source.conn.password": p}, ["'source.conn.password'", "no 'encrypt.wrapped.key'"]),
        (
            lambda p, w: {"source.conn.password": "ENC(%%%)", WRAPPED_KEY_PROPERTY: w},
            ["'source.conn.password' is not a valid ENC(...) value"],
        ),
        (
            lambda p, w: {"source.conn.password": p, WRAPPED_KEY_PROPERTY: "bm90IGEga2V5"},
            ["'encrypt.wrapped.key' is not a wrapped key"],
        ),
        (
            lambda p, w: {"source.conn.password": p, WRAPPED_KEY_PROPERTY: flip_byte(w, -1)},
            ["'encrypt.wrapped.key' failed its integrity check"],
        ),
        (
            lambda p, w: {
                "source.conn.password": client.encrypt(client.generate_key(), SECRET),
                WRAPPED_KEY_PROPERTY: w,
            },
            ["'source.conn.password' was encrypted with a different customer key"],
        ),
    ],
)
def test_bad_encrypted_values_are_400_naming_the_property(api, stored_key, change, words):
    value = services.encrypt_value(stored_key.wrapped_key, SECRET)
    assert_refused(post(api, change(value, stored_key.wrapped_key)), *words)


def test_a_wrapped_key_from_another_portal_is_refused(api, stored_key, customer_key):
    foreign = wrapping.wrap(new_ring(), customer_key)
    properties = {"source.conn.password": client.encrypt(customer_key, SECRET), WRAPPED_KEY_PROPERTY: foreign}
    assert_refused(
        post(api, properties), "'encrypt.wrapped.key' was wrapped with master key", "does not have"
    )


def test_someone_elses_wrapped_key_cannot_be_copied_into_your_flow(api, stored_key, outsider):
    """Flows are visible to every signed-in user: copying the owner's wrapped
    key and ENC values into your own flow must not make the portal decrypt them."""
    properties = {
        "source.conn.password": services.encrypt_value(stored_key.wrapped_key, SECRET),
        WRAPPED_KEY_PROPERTY: stored_key.wrapped_key,
    }
    assert post(api, properties, flowName="theirs").status_code == 201
    copied = api_client_for(outsider).post(
        "/api/flowconfigs",
        body(properties, flowGroup="outsiders", flowName="mine", templateUris=""),
        format="json",
    )
    assert copied.status_code == 400
    assert (
        "'encrypt.wrapped.key' is not one of the flow owner's customer keys" in copied.json()["properties"][0]
    )
    assert not FlowConfig.objects.filter(flow_name="mine").exists()


def test_a_group_key_serves_every_member(api, owner, outsider, master_key_file):
    from django.contrib.auth.models import Group

    team = Group.objects.create(name="team")
    owner.groups.add(team)
    outsider.groups.add(team)
    packs.set_acl(
        make_pack(owner, "open", {"t.template": "a = 1"}),
        user=owner,
        entries=[{"role": "owner", "user": owner.username}, {"role": "reader", "group": "team"}],
    )
    shared = services.wrap_customer_key(user=owner, generate=True, group="team").customer_key
    properties = {
        "db.password": services.encrypt_value(shared.wrapped_key, SECRET),
        WRAPPED_KEY_PROPERTY: shared.wrapped_key,
    }
    response = api_client_for(outsider).post(
        "/api/flowconfigs", body(properties, templateUris="pack://open/t.template"), format="json"
    )
    assert response.status_code == 201, response.content


def test_the_catalog_service_refuses_for_pages_and_api_alike(owner, master_key_file):
    """Pages and the API both save through flows.services: the same error for both."""
    data = {
        "flow_group": "sales",
        "flow_name": "orders",
        "template_uris": TEMPLATE,
        "properties": {"source.conn.password": SECRET},
    }
    with pytest.raises(ValidationError) as caught:
        flow_services.create_flow(owner=owner, data=data)
    [message] = caught.value.message_dict["properties"]
    assert "'source.conn.password'" in message and SECRET not in message
    assert not FlowConfig.objects.exists()
