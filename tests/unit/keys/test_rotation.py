"""`manage.py rotate_master_key`: a new master key wraps from now on, every
stored key and flow is re-wrapped through the catalog service, ENC values are
never touched and stay decryptable, and old master keys go only when asked
and only when nothing uses them any more."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from portal.crypto import atrest, client, wrapping
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, decrypt_properties
from portal.crypto.master import get_ring, read_ring_file
from portal.flows import services as flow_services
from portal.flows.models import FlowConfig
from portal.flows.signals import flow_catalog_changed
from portal.keys import services
from portal.keys.models import CustomerKey
from portal.keys.rotation import master_keys_in_use, rotate_master_key
from portal.monitoring.models import Subscription
from tests.builders.keys import SECRET
from tests.factories import FlowConfigFactory
from tests.unit.topology.helpers import nodes

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def topology(db):
    nodes("db", kind="jdbc")
    nodes("lake")


def flow_with_secret(owner, stored, name: str = "orders") -> FlowConfig:
    return flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "sales",
            "flow_name": name,
            "source": "db",
            "destinations": ["lake"],
            "properties": {
                "source.jdbc.tables": "orders",
                "extract.is.full": "true",
                "source.conn.password": services.encrypt_value(stored.wrapped_key, SECRET),
                "source.conn.username": "etl",
                WRAPPED_KEY_PROPERTY: stored.wrapped_key,
            },
        },
    )


def rotate(*args: str) -> str:
    out = io.StringIO()
    call_command("rotate_master_key", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def catalog_events():
    events = []

    def listener(sender, action, flow, **kwargs):
        events.append((action, str(flow)))

    flow_catalog_changed.connect(listener)
    yield events
    flow_catalog_changed.disconnect(listener)


def test_rotation_rewraps_keys_and_flows_and_keeps_values_decryptable(
    owner, stored_key, master_key_file, catalog_events
):
    old_id = get_ring().active_id
    flow = flow_with_secret(owner, stored_key)
    before = dict(flow.properties)
    catalog_events.clear()

    output = rotate()

    ring = read_ring_file(master_key_file)
    assert ring.active_id != old_id and set(ring.keys) == {old_id, ring.active_id}
    assert f"New active master key: {ring.active_id}." in output
    assert "Re-wrapped 1 customer key(s) and 1 flow(s)." in output
    assert "--remove-old" in output

    stored_key.refresh_from_db()
    assert stored_key.master_key_id == ring.active_id
    assert wrapping.parse(stored_key.wrapped_key).master_key_id == ring.active_id
    flow.refresh_from_db()
    assert wrapping.parse(flow.properties[WRAPPED_KEY_PROPERTY]).master_key_id == ring.active_id
    # Only the wrapped key changed; the ENC value is byte for byte the same.
    assert {k: v for k, v in flow.properties.items() if k != WRAPPED_KEY_PROPERTY} == {
        k: v for k, v in before.items() if k != WRAPPED_KEY_PROPERTY
    }
    assert catalog_events == [("secrets", "sales/orders")]  # through flows.services
    assert decrypt_properties(flow.properties)["source.conn.password"] == SECRET
    # The old properties (e.g. an execution made before the rotation) still decrypt.
    assert decrypt_properties(before)["source.conn.password"] == SECRET
    # New wraps and encryptions use the new master key, and the stored key still works.
    assert (
        wrapping.parse(
            services.wrap_customer_key(user=owner, generate=True).customer_key.wrapped_key
        ).master_key_id
        == ring.active_id
    )
    value = services.encrypt_value(stored_key.wrapped_key, "new")
    assert decrypt_properties({**flow.properties, "x.password": value})["x.password"] == "new"


def test_remove_old_drops_unused_master_keys_and_old_envelopes_stop_working(
    owner, stored_key, master_key_file
):
    old_id = get_ring().active_id
    flow = flow_with_secret(owner, stored_key)
    before = dict(flow.properties)
    output = rotate("--remove-old")
    ring = read_ring_file(master_key_file)
    assert set(ring.keys) == {ring.active_id} and f"Removed old master key(s): {old_id}." in output
    flow.refresh_from_db()
    assert decrypt_properties(flow.properties)["source.conn.password"] == SECRET
    with pytest.raises(services.DecryptionError) as caught:
        decrypt_properties(before)
    assert caught.value.code == "unknown_master_key" and old_id in str(caught.value)


def test_a_flow_that_cannot_be_rewrapped_is_reported_and_keeps_its_master_key(
    owner, outsider, stored_key, master_key_file
):
    old_id = get_ring().active_id
    good = flow_with_secret(owner, stored_key)
    # A flow the service would refuse today (its owner cannot use this key),
    # stored around the service, as an older portal might have left it.
    stuck = FlowConfigFactory(owner=outsider, flow_name="stuck", properties=dict(good.properties))

    with pytest.raises(CommandError, match="Not re-wrapped") as caught:
        rotate("--remove-old")
    assert "flow sales/stuck: not re-wrapped" in str(caught.value)
    assert "not one of the flow owner's customer keys" in str(caught.value)
    assert SECRET not in str(caught.value)

    ring = read_ring_file(master_key_file)
    assert old_id in ring.keys  # still needed by the stuck flow
    stuck.refresh_from_db()
    assert wrapping.parse(stuck.properties[WRAPPED_KEY_PROPERTY]).master_key_id == old_id
    assert decrypt_properties(stuck.properties)["source.conn.password"] == SECRET

    # Fixed (here: removed), a rewrap-only run finishes the job without a new key.
    stuck.delete()
    output = rotate("--rewrap-only", "--remove-old")
    assert (
        f"Active master key: {ring.active_id}." in output
        and f"Removed old master key(s): {old_id}." in output
    )
    assert set(read_ring_file(master_key_file).keys) == {ring.active_id}


def test_rotation_needs_a_key_file(settings, owner):
    settings.FLOWPORT_MASTER_KEY_FILE = ""
    settings.FLOWPORT_MASTER_KEY = client.encode_key(client.generate_key())
    with pytest.raises(CommandError, match="rotation needs a key file"):
        rotate()


def test_rotation_report_counts_only_what_needed_rewrapping(owner, stored_key, master_key_file):
    flow_with_secret(owner, stored_key)
    first = rotate_master_key()
    assert (first.customer_keys_rewrapped, first.flows_rewrapped) == (1, 1)
    again = rotate_master_key(rewrap_only=True)
    assert (again.customer_keys_rewrapped, again.flows_rewrapped, again.failures) == (0, 0, [])
    assert CustomerKey.objects.get().master_key_id == again.active_id == first.active_id


def test_a_sealed_webhook_url_follows_the_rotation_and_old_keys_can_go(owner, master_key_file):
    """A subscriber's webhook URL is sealed under a data key of its own (crypto.atrest); rotation
    re-wraps that data key, so the old master key is no longer needed and the URL still reads back."""
    flow = FlowConfigFactory(flow_group="sales", flow_name="hooked")
    hook = "https://hooks.example.org/services/T000/B000/sEcReTtOkEn"
    subscription = Subscription.objects.create(user=owner, flow=flow, by_email=False, webhook_url=hook)
    old_id = get_ring().active_id
    assert master_keys_in_use()[old_id] == 1

    output = rotate("--remove-old")

    ring = read_ring_file(master_key_file)
    assert set(ring.keys) == {ring.active_id} and f"Removed old master key(s): {old_id}." in output
    assert atrest.master_key_id(sealed_column(subscription)) == ring.active_id
    assert Subscription.objects.get(pk=subscription.pk).webhook_url == hook


def sealed_column(subscription: Subscription) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT webhook_url FROM monitoring_subscription WHERE id = %s", [subscription.pk])
        return cursor.fetchone()[0]
