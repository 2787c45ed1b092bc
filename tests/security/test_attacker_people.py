"""Mallory, an ordinary account, against the people pages and the list of nodes she may ask for.

The user-management pages are staff's: every one refuses her (403), whatever she sends, and makes
nothing; a forged form without its CSRF token is refused even when staff's browser sends it. The
list of data nodes she holds no grant on names victor's nodes so she can ask for them, and shows
nothing of their connections: no URL, host, account, password or path. Nor can she answer her
own request."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from portal.topology import grants
from portal.topology.models import DataNode, DataNodeAccessRequest, DataNodeGrant
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

SECRETS = ("hunter2", "db.internal", "victor_svc", "ENC(", "payroll-secret-folder", "jdbc:", "5432")


@pytest.fixture
def victor(db, settings):
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"
    victor = UserFactory(username="victor")
    payroll = DataNode.objects.create(
        name="payroll",
        kind="jdbc",
        description="Salaries, monthly",
        properties={
            "url": "jdbc:postgresql://victor_svc:hunter2@db.internal:5432/payroll?password=hunter2",
            "user": "victor_svc",
            "password": "ENC(AAAAvictorsciphertext)",
        },
    )
    DataNodeGrant.objects.create(node=payroll, role="owner", user=victor)
    folder = DataNode.objects.create(
        name="victors-folder",
        kind="files",
        user_made=True,
        created_by=victor,
        properties={"path": "users/victor/payroll-secret-folder"},
    )
    DataNodeGrant.objects.create(node=folder, role="owner", user=victor)
    return victor


@pytest.fixture
def mallory(db):
    return UserFactory(username="mallory")


def browser(user, **options) -> Client:
    client = Client(**options)
    client.force_login(user)
    return client


def test_the_list_of_nodes_she_may_ask_for_names_them_and_shows_no_connection(victor, mallory):
    for url in ("/topology/datanodes/", "/topology/datanodes/?q=payroll", "/topology/datanodes/?q=victor"):
        html = browser(mallory).get(url).content.decode()
        leaked = [secret for secret in SECRETS if secret in html]
        assert leaked == [], f"{url} shows {leaked}"
    html = browser(mallory).get("/topology/datanodes/").content.decode()
    asked_for = html[html.index('id="askable-nodes"') :]
    assert "payroll" in asked_for and "victors-folder" in asked_for and "Salaries, monthly" in asked_for
    # A search for a secret finds nothing: only names and descriptions are searched.
    html = browser(mallory).get("/topology/datanodes/?q=hunter2").content.decode()
    assert "None matches “hunter2”." in html and "payroll" not in html


def test_she_cannot_answer_her_own_request(victor, mallory):
    payroll = DataNode.objects.get(name="payroll")
    asked = DataNodeAccessRequest.objects.create(node=payroll, requested_by=mallory, role="read")
    answer = browser(mallory).post(
        f"/topology/datanodes/payroll/access-requests/{asked.pk}/",
        {"decision": "grant", "next": "/monitoring/"},
    )
    assert answer.status_code == 403
    assert not grants.may_use(mallory, "payroll", "read")
    assert 'id="access-requests"' not in browser(mallory).get("/monitoring/").content.decode()


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("get", "/people/", {}),
        ("get", "/people/new/", {}),
        (
            "post",
            "/people/new/",
            {"username": "sleeper", "password1": "x-long-pass-1", "password2": "x-long-pass-1"},
        ),
        ("get", "/people/{victor}/", {}),
        ("post", "/people/{mallory}/", {"groups": ["{admins}"]}),
        ("post", "/people/{victor}/active/", {"active": "no"}),
        ("get", "/people/groups/", {}),
        ("post", "/people/groups/", {"name": "mallorys-own"}),
        ("get", "/people/groups/{admins}/", {}),
    ],
)
def test_an_ordinary_user_cannot_reach_user_management(victor, mallory, method, url, body):
    admins = Group.objects.create(name="admins")
    ids = {"victor": victor.pk, "mallory": mallory.pk, "admins": admins.pk}
    url = url.format(**ids)
    body = {
        key: [v.format(**ids) for v in value] if isinstance(value, list) else value
        for key, value in body.items()
    }
    before = (get_user_model().objects.count(), Group.objects.count())
    answer = getattr(browser(mallory), method)(url, body)
    assert answer.status_code == 403
    assert "Only staff manage users and groups." in answer.content.decode()
    victor.refresh_from_db()
    assert victor.is_active and not mallory.groups.exists()
    assert (get_user_model().objects.count(), Group.objects.count()) == before
    assert Client().get(url).status_code == 302  # and a visitor is sent to sign in


def test_a_forged_form_without_the_csrf_token_makes_no_user(mallory):
    staff = UserFactory(username="stella", is_staff=True)
    forged = browser(staff, enforce_csrf_checks=True).post(
        "/people/new/", {"username": "sleeper", "password1": "x-long-pass-1", "password2": "x-long-pass-1"}
    )
    assert forged.status_code == 403
    assert not get_user_model().objects.filter(username="sleeper").exists()
    forged = browser(staff, enforce_csrf_checks=True).post(f"/people/{mallory.pk}/active/", {"active": "no"})
    assert forged.status_code == 403
    mallory.refresh_from_db()
    assert mallory.is_active
