"""Personal API tokens: created on the profile page, shown once, stored hashed."""

from __future__ import annotations

import re
from datetime import timedelta

from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from portal.accounts import tokens
from portal.accounts.models import ApiToken, hash_token
from tests.factories import UserFactory


def token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_owner_creates_a_token_sees_it_once_and_uses_it(client, owner):
    client.force_login(owner)

    response = client.post(reverse("accounts:token-create"), {"name": "nightly script"})

    assert response.status_code == 201
    key = re.search(r'id="new-token-key">([^<]+)<', response.content.decode()).group(1)
    token = ApiToken.objects.get(user=owner)
    assert token.key_hash == hash_token(key)
    assert key not in str(ApiToken.objects.values_list().get())
    assert key not in client.get(reverse("accounts:profile")).content.decode()
    assert token_client(key).get("/api/me").json()["username"] == "olivia"
    token.refresh_from_db()
    assert token.last_used is not None


def test_token_form_errors_are_field_level_and_nothing_is_saved(client, owner):
    client.force_login(owner)

    response = client.post(reverse("accounts:token-create"), {"name": "", "expires_at": "2001-01-01 00:00"})

    assert response.status_code == 400
    assert "This field is required" in response.content.decode()
    response = client.post(
        reverse("accounts:token-create"), {"name": "old", "expires_at": "2001-01-01 00:00"}
    )
    assert response.status_code == 400
    assert "The expiry must be in the future" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_revoked_and_expired_tokens_get_401(owner):
    revoked, revoked_key = tokens.create_token(owner, name="old")
    tokens.revoke_token(owner, revoked.pk)
    expiring, expiring_key = tokens.create_token(
        owner, name="short", expires_at=timezone.now() + timedelta(hours=1)
    )
    ApiToken.objects.filter(pk=expiring.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    for key in (revoked_key, expiring_key, "fp_nothere_x", "garbage"):
        response = token_client(key).get("/api/me")
        assert response.status_code == 401
        assert response["WWW-Authenticate"] == 'Token realm="api", Basic realm="api", charset="UTF-8"'


def test_a_forged_key_with_a_real_prefix_is_refused(owner):
    token, _key = tokens.create_token(owner, name="t")
    forged = f"fp_{token.prefix}_{'A' * 43}"
    assert token_client(forged).get("/api/me").status_code == 401


def test_anonymous_api_calls_get_401_with_a_challenge(db):
    response = APIClient().get("/api/me")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Token")


def test_a_program_is_offered_basic_but_a_browser_never_is(db):
    """A browser offered Basic would ask for a password, then send it unasked with every
    request to the portal, cross-site ones included: it is offered the token scheme alone."""
    program = APIClient().get("/api/me")
    assert "Basic" in program["WWW-Authenticate"]
    browser = APIClient().get("/api/me", HTTP_SEC_FETCH_MODE="navigate", HTTP_SEC_FETCH_SITE="cross-site")
    assert browser.status_code == 401
    assert browser["WWW-Authenticate"] == 'Token realm="api"'
    fetched = APIClient().get("/api/me", HTTP_SEC_FETCH_SITE="same-origin")
    assert fetched["WWW-Authenticate"] == 'Token realm="api"'


def test_a_user_revokes_only_their_own_tokens(client, owner, outsider):
    token, key = tokens.create_token(owner, name="mine")
    client.force_login(outsider)

    assert client.post(reverse("accounts:token-revoke", args=[token.pk])).status_code == 404
    assert token_client(key).get("/api/me").status_code == 200

    client.force_login(owner)
    assert client.post(reverse("accounts:token-revoke", args=[token.pk])).status_code == 302
    assert token_client(key).get("/api/me").status_code == 401


def test_profile_lists_tokens_without_their_keys(client, owner):
    _token, key = tokens.create_token(owner, name="ci")
    UserFactory(username="x")
    client.force_login(owner)

    body = client.get(reverse("accounts:profile")).content.decode()

    assert "ci" in body
    assert key not in body
    assert key.split("_", 2)[2] not in body  # the secret part (it may itself hold "_")


def test_token_of_a_deactivated_user_stops_working(owner):
    _token, key = tokens.create_token(owner, name="t")
    owner.is_active = False
    owner.save()
    assert token_client(key).get("/api/me").status_code == 401
