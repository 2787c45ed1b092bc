"""`manage.py bind_secrets`: values made before owner binding (version 1)
are encrypted again bound to their key's owner, through the catalog service;
the secret is unchanged, a second run binds nothing, and a value the flow's
owner no longer holds the key of is reported, its flow untouched."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from portal.crypto import client
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, decrypt_properties
from portal.flows.models import FlowConfig
from portal.keys import services
from portal.keys.models import CustomerKey
from tests.builders.keys import SECRET

pytestmark = pytest.mark.django_db


def legacy_flow(owner, stored, name: str = "orders") -> FlowConfig:
    """A flow an older portal saved, before values were bound (and before today's save rules)."""
    return FlowConfig.objects.create(
        owner=owner,
        flow_group="sales",
        flow_name=name,
        properties={
            "source.conn.password": services.encrypt_value(stored.wrapped_key, SECRET),  # version 1
            WRAPPED_KEY_PROPERTY: stored.wrapped_key,
        },
    )


def bind() -> str:
    out = io.StringIO()
    call_command("bind_secrets", stdout=out)
    return out.getvalue()


def test_a_legacy_value_is_bound_to_its_keys_owner_and_still_decrypts(owner, stored_key):
    flow = legacy_flow(owner, stored_key)
    assert client.owner_of(flow.properties["source.conn.password"]) is None

    assert bind() == "Bound 1 value(s) in 1 flow(s).\n"

    flow.refresh_from_db()
    value = flow.properties["source.conn.password"]
    assert client.owner_of(value) == f"user:{owner.pk}"
    assert decrypt_properties(flow.properties)["source.conn.password"] == SECRET
    assert bind() == "Bound 0 value(s) in 0 flow(s).\n"


def test_a_value_whose_key_the_owner_no_longer_holds_is_reported_and_left(owner, stored_key):
    flow = legacy_flow(owner, stored_key)
    before = flow.properties["source.conn.password"]
    CustomerKey.objects.filter(pk=stored_key.pk).delete()

    with pytest.raises(CommandError) as failed:
        bind()

    assert "'source.conn.password' not bound: This key is not one of yours" in str(failed.value)
    flow.refresh_from_db()
    assert flow.properties["source.conn.password"] == before
