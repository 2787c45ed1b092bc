"""The Keys page: the same service as the API, the generated key shown once."""

from __future__ import annotations

import pytest

from portal.crypto import client
from portal.keys.models import CustomerKey

pytestmark = pytest.mark.django_db


@pytest.fixture
def page(client, owner, master_key_file):
    client.force_login(owner)
    return client


def test_anonymous_visitors_are_sent_to_log_in(client, master_key_file):
    assert client.get("/keys/").status_code == 302
    assert client.post("/keys/", {"generate": "on"}).status_code == 302
    assert not CustomerKey.objects.exists()


def test_a_generated_key_is_shown_once(page, owner):
    response = page.post("/keys/", {"generate": "on", "label": "prod-db"})
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    record = CustomerKey.objects.get()
    shown = response.context["new_key"]
    assert client.key_fingerprint(client.load_key(shown)).startswith(record.short_fingerprint)
    assert shown in response.content.decode()
    assert f"Key “prod-db” of {owner.username} is wrapped with the master key and stored." in [
        str(m) for m in response.context["messages"]
    ]

    again = page.get("/keys/")
    html = again.content.decode()
    assert shown not in html
    assert record.wrapped_key in html and "prod-db" in html


def test_a_bad_key_is_a_field_error_and_is_not_echoed(page):
    typed = "secret-but-not-base64!"
    response = page.post("/keys/", {"key": typed, "label": "x"})
    assert response.status_code == 400
    assert "not valid base64" in " ".join(response.context["form"].errors["key"])
    assert typed not in response.content.decode()
    assert not CustomerKey.objects.exists()


def test_a_held_key_can_be_wrapped_for_a_group(page, owner):
    from django.contrib.auth.models import Group

    owner.groups.add(Group.objects.create(name="team"))
    key = client.encode_key(client.generate_key())
    response = page.post("/keys/", {"key": key, "group": "team", "generate": "on"})
    assert response.status_code == 201
    assert response.context["new_key"] is None and key not in response.content.decode()
    assert CustomerKey.objects.get().owner_group.name == "team"


def test_others_keys_are_not_listed(page, owner, outsider, client):
    page.post("/keys/", {"generate": "on", "label": "olivias"})
    client.force_login(outsider)
    assert "olivias" not in client.get("/keys/").content.decode()
