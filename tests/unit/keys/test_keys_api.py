"""Stories of people wrapping keys and encrypting secrets through `/api/keys`:
an owner, a teammate (group member) and an outsider."""

from __future__ import annotations

import logging

import pytest
from django.contrib.auth.models import Group

from portal.crypto import client, wrapping
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, decrypt_properties
from portal.crypto.master import get_ring, new_ring
from portal.keys.models import CustomerKey
from tests.builders.api import api_client_for
from tests.builders.keys import SECRET
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

ENDPOINTS = [
    ("get", "/api/keys", None),
    ("post", "/api/keys/wrap", {"generate": True}),
    ("post", "/api/keys/encrypt", {"wrappedKey": "AAAA", "plaintext": "x"}),
]


@pytest.fixture
def team(owner):
    group = Group.objects.create(name="sales-team")
    owner.groups.add(group)
    return group


@pytest.fixture
def teammate(team):
    user = UserFactory(username="tina")
    user.groups.add(team)
    return user


def wrap(api, **body):
    return api.post("/api/keys/wrap", body, format="json")


@pytest.mark.parametrize(("method", "url", "body"), ENDPOINTS)
def test_every_endpoint_needs_a_signed_in_caller(master_key_file, method, url, body):
    response = getattr(api_client_for(None), method)(url, body, format="json")
    assert response.status_code in (401, 403)
    assert not CustomerKey.objects.exists()


def test_a_generated_key_is_returned_once_and_never_listed_or_stored(api, owner, master_key_file, caplog):
    caplog.set_level(logging.DEBUG)
    response = wrap(api, generate=True, label="prod-db")
    assert response.status_code == 201, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    key = client.load_key(body["key"])
    assert body["label"] == "prod-db" and body["owner"] == owner.username and body["group"] is None
    assert body["fingerprint"] == client.key_fingerprint(key)[:16]
    assert wrapping.unwrap(get_ring(), body["wrappedKey"]) == key
    assert body["masterKeyId"] == wrapping.parse(body["wrappedKey"]).master_key_id

    listed = api.get("/api/keys")
    assert listed.status_code == 200
    [item] = listed.json()["results"]
    assert "key" not in item
    assert item == {k: v for k, v in body.items() if k != "key"}
    assert body["key"] not in listed.content.decode()

    row = CustomerKey.objects.values().get()
    assert body["key"] not in str(row) and key.hex() not in str(row)
    assert body["key"] not in caplog.text


def test_a_key_the_caller_holds_is_wrapped_and_not_echoed(api, master_key_file, customer_key):
    encoded = client.encode_key(customer_key)
    response = wrap(api, key=encoded)
    assert response.status_code == 201, response.content
    assert response.json()["key"] is None
    assert encoded not in response.content.decode()
    assert wrapping.unwrap(get_ring(), response.json()["wrappedKey"]) == customer_key


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({}, "key", "Give a base64 AES-256 key"),
        ({"generate": False}, "key", "Give a base64 AES-256 key"),
        ({"key": "@@not base64@@"}, "key", "not valid base64"),
        ({"key": client.encode_key(b"short key 16 b!!")}, "key", "must be 32 bytes"),
        ({"key": client.encode_key(b"k" * 32), "generate": True}, "key", "not both"),
        ({"key": 12345}, "key", "Must be a string"),
        ({"generate": True, "group": "nobody-has-this"}, "group", "not a member"),
        ({"generate": True, "label": "x" * 129}, "label", "128"),
    ],
)
def test_bad_wrap_requests_are_400_naming_the_field(api, master_key_file, body, field, words):
    response = wrap(api, **body)
    assert response.status_code == 400, response.content
    errors = response.json()
    assert list(errors) == [field], errors
    assert words in " ".join(errors[field])
    if isinstance(body.get("key"), str):
        assert body["key"] not in response.content.decode()
    assert not CustomerKey.objects.exists()


def test_labels_are_unique_per_owner(api, outsider, master_key_file):
    assert wrap(api, generate=True, label="main").status_code == 201
    again = wrap(api, generate=True, label="main")
    assert again.status_code == 400 and "already a key labelled 'main'" in again.json()["label"][0]
    assert wrap(api_client_for(outsider), generate=True, label="main").status_code == 201
    assert wrap(api, generate=True).status_code == 201 and wrap(api, generate=True).status_code == 201


def test_group_keys_are_shared_with_members_only(api, owner, teammate, outsider, master_key_file):
    response = wrap(api, generate=True, label="team", group="sales-team")
    assert response.status_code == 201, response.content
    assert response.json()["group"] == "sales-team" and response.json()["owner"] is None
    wrap(api, generate=True, label="mine")

    def labels(user):
        return sorted(item["label"] for item in api_client_for(user).get("/api/keys").json()["results"])

    assert labels(owner) == ["mine", "team"]
    assert labels(teammate) == ["team"]
    assert labels(outsider) == []
    refused = wrap(api_client_for(outsider), generate=True, group="sales-team")
    assert refused.status_code == 400 and "not a member" in refused.json()["group"][0]


def test_encrypt_makes_an_enc_value_the_worker_can_decrypt(api, owner, stored_key, customer_key):
    by_wrapped = api.post(
        "/api/keys/encrypt", {"wrappedKey": stored_key.wrapped_key, "plaintext": SECRET}, format="json"
    )
    assert by_wrapped.status_code == 200, by_wrapped.content
    assert by_wrapped["Cache-Control"] == "no-store"
    by_id = api.post("/api/keys/encrypt", {"keyId": stored_key.pk, "plaintext": " padded "}, format="json")
    assert by_id.status_code == 200, by_id.content
    properties = {
        "source.conn.password": by_wrapped.json()["value"],
        "writer.jdbc.password": by_id.json()["value"],
        WRAPPED_KEY_PROPERTY: stored_key.wrapped_key,
    }
    assert SECRET not in by_wrapped.content.decode()
    assert decrypt_properties(properties) == {
        **properties,
        "source.conn.password": SECRET,
        "writer.jdbc.password": " padded ",
    }
    assert client.decrypt(customer_key, by_wrapped.json()["value"]) == SECRET


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"plaintext": "x"}, "wrappedKey", "either wrappedKey or keyId"),
        ({"wrappedKey": "AAAA", "keyId": 1, "plaintext": "x"}, "wrappedKey", "either wrappedKey or keyId"),
        ({"wrappedKey": "AAAA"}, "plaintext", "required"),
        ({"wrappedKey": "!!", "plaintext": SECRET}, "wrappedKey", "is not a wrapped key"),
        ({"keyId": 999999, "plaintext": SECRET}, "keyId", "no key with this id"),
        ({"keyId": 0, "plaintext": SECRET}, "keyId", "greater than or equal to 1"),
        ({"keyId": 10**30, "plaintext": SECRET}, "keyId", "less than or equal to"),
    ],
)
def test_bad_encrypt_requests_are_400_naming_the_field(api, stored_key, body, field, words):
    response = api.post("/api/keys/encrypt", body, format="json")
    assert response.status_code == 400, response.content
    assert words in " ".join(response.json()[field])
    assert SECRET not in response.content.decode()


def test_encrypt_tells_why_a_wrapped_key_is_unusable(api, stored_key, customer_key):
    foreign = wrapping.wrap(new_ring(), customer_key)
    response = api.post("/api/keys/encrypt", {"wrappedKey": foreign, "plaintext": SECRET}, format="json")
    assert response.status_code == 400
    assert "which this portal does not have" in response.json()["wrappedKey"][0]
    too_long = "é" * (client.MAX_PLAINTEXT_BYTES // 2 + 1)  # few characters, too many bytes
    response = api.post(
        "/api/keys/encrypt", {"wrappedKey": stored_key.wrapped_key, "plaintext": too_long}, format="json"
    )
    assert response.status_code == 400 and "bytes" in response.json()["plaintext"][0]


def test_someone_elses_key_id_is_not_usable(stored_key, outsider):
    response = api_client_for(outsider).post(
        "/api/keys/encrypt", {"keyId": stored_key.pk, "plaintext": "x"}, format="json"
    )
    assert response.status_code == 400 and "no key with this id" in response.json()["keyId"][0]


def test_without_a_usable_master_key_the_answer_is_503_and_says_nothing_of_the_file(api, master_key_file):
    master_key_file.chmod(0o644)
    response = wrap(api, generate=True)
    assert response.status_code == 503
    assert "master key" in response.json()["detail"] and str(master_key_file) not in response.content.decode()
    assert not CustomerKey.objects.exists()
