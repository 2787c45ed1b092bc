"""Proxy users: members of FLOWPORT_PROXY_GROUP may act as another user, audited."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from portal.accounts import tokens
from portal.accounts.models import ProxyAuditEvent
from tests.factories import UserFactory


@pytest.fixture
def proxy_bot(db, settings):
    settings.FLOWPORT_PROXY_GROUP = "flowport-proxies"
    bot = UserFactory(username="ingest-bot")
    bot.groups.add(Group.objects.create(name="flowport-proxies"))
    return bot


def client_with_token(user) -> APIClient:
    _token, key = tokens.create_token(user, name="t")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_proxy_group_member_acts_as_another_user_and_is_audited(proxy_bot, owner):
    response = client_with_token(proxy_bot).get("/api/me", HTTP_X_FLOWPORT_PROXY_USER="olivia")

    assert response.status_code == 200
    assert response.json()["username"] == "olivia"
    assert response.json()["actor"] == "ingest-bot"
    event = ProxyAuditEvent.objects.get()
    assert (event.actor, event.acting_as, event.method, event.path) == (proxy_bot, owner, "GET", "/api/me")


def test_proxy_works_with_http_basic_too(proxy_bot, owner):
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION="Basic "
        + __import__("base64").b64encode(b"ingest-bot:correct horse battery staple").decode()
    )
    assert client.get("/api/me", HTTP_X_FLOWPORT_PROXY_USER="olivia").json()["username"] == "olivia"


def test_anyone_else_trying_to_proxy_gets_403_and_no_audit_row(proxy_bot, owner, outsider):
    response = client_with_token(outsider).get("/api/me", HTTP_X_FLOWPORT_PROXY_USER="olivia")

    assert response.status_code == 403
    assert "may not act as another user" in response.json()["detail"]
    assert not ProxyAuditEvent.objects.exists()


def test_without_a_configured_group_nobody_may_proxy(proxy_bot, owner, settings):
    settings.FLOWPORT_PROXY_GROUP = ""
    assert client_with_token(proxy_bot).get("/api/me", HTTP_X_FLOWPORT_PROXY_USER="olivia").status_code == 403


def test_proxying_to_an_unknown_user_is_a_400_naming_the_header(proxy_bot):
    response = client_with_token(proxy_bot).get("/api/me", HTTP_X_FLOWPORT_PROXY_USER="nobody")
    assert response.status_code == 400
    assert "X-Flowport-Proxy-User" in response.json()


def test_a_proxy_cannot_become_a_superuser(proxy_bot):
    UserFactory(username="root", is_superuser=True)
    assert client_with_token(proxy_bot).get("/api/me", HTTP_X_FLOWPORT_PROXY_USER="root").status_code == 403
