"""Logging in against a real OpenLDAP directory started by the test session."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.urls import reverse

from tests.builders.ldap import apply_ldap
from tests.ldap_server import BIND_PASSWORD, GROUPS_DN
from tests.ports import free_port

User = get_user_model()


def login(client, username: str, password: str):
    return client.post(reverse("login"), {"username": username, "password": password})


def test_alice_logs_in_with_her_directory_password_and_gets_her_groups(client, ldap_on):
    response = login(client, "alice", "alice-pw")

    assert response.status_code == 302
    alice = User.objects.get(username="alice")
    assert (alice.first_name, alice.last_name, alice.email) == ("Alice", "Archer", "alice@flowport.test")
    assert set(alice.groups.values_list("name", flat=True)) == {"flowport-users", "etl-team"}
    assert not alice.has_usable_password()
    assert not alice.is_staff
    assert client.get(reverse("accounts:profile")).status_code == 200


def test_bob_is_admitted_through_a_nested_group(client, ldap_on):
    response = login(client, "bob", "bob-pw")

    assert response.status_code == 302
    assert set(User.objects.get(username="bob").groups.values_list("name", flat=True)) == {
        "data-eng",
        "flowport-users",
    }


def test_staff_and_superuser_flags_come_from_directory_groups(client, ldap_on):
    assert login(client, "dana", "dana-pw").status_code == 302
    client.logout()
    assert login(client, "erin", "erin-pw").status_code == 302
    dana, erin = User.objects.get(username="dana"), User.objects.get(username="erin")
    assert dana.is_staff and not dana.is_superuser
    assert erin.is_superuser


@pytest.mark.parametrize(
    ("username", "password", "expected"),
    [
        ("alice", "wrong-pw", "Please enter a correct username and password"),
        ("zed", "zed-pw", "Please enter a correct username and password"),
        ("carol", "carol-pw", "Please enter a correct username and password"),  # not in flowport-users
        ("alice", "", "This field is required"),
    ],
)
def test_bad_logins_fail_cleanly(client, ldap_on, username, password, expected):
    response = login(client, username, password)

    assert response.status_code == 200
    assert not response.wsgi_request.user.is_authenticated
    assert expected in response.content.decode()
    if username != "alice":
        assert not User.objects.filter(username=username).exists()


@pytest.mark.parametrize("username", ["*)(uid=*", "admin)(|(uid=*", "*", "alice)(uid=*", "admin*"])
def test_ldap_injection_in_the_username_matches_nobody(client, ldap_on, username):
    # With a real password of someone the filter would match if unescaped.
    for password in ("admin-pw", "alice-pw"):
        response = login(client, username, password)
        assert response.status_code == 200
        assert not response.wsgi_request.user.is_authenticated
    assert not User.objects.filter(username=username).exists()
    assert User.objects.count() == 0


def test_directory_down_gives_a_clear_login_error_not_a_500(client, settings, db):
    apply_ldap(settings, f"ldap://127.0.0.1:{free_port()}")

    response = login(client, "alice", "alice-pw")

    assert response.status_code == 200
    body = response.content.decode()
    assert "login directory cannot be reached" in body
    assert BIND_PASSWORD not in body
    assert not response.wsgi_request.user.is_authenticated


def test_local_admin_still_logs_in_while_the_directory_is_down(client, settings, owner):
    apply_ldap(settings, f"ldap://127.0.0.1:{free_port()}")

    response = login(client, "olivia", "correct horse battery staple")

    assert response.status_code == 302


def test_login_page_names_the_directory_but_never_the_bind_secret(client, ldap_on, settings):
    settings.LDAP_DIRECTORY_NAME = "Flowport test directory"

    body = client.get(reverse("login")).content.decode()

    assert f"Flowport test directory account ({ldap_on.uri})" in body
    assert BIND_PASSWORD not in body
    assert "cn=portal" not in body


def test_without_ldap_the_login_page_says_local_accounts(client, db):
    body = client.get(reverse("login")).content.decode()
    assert "no LDAP directory is configured" in body


def test_directory_groups_mirror_again_at_each_login(client, ldap_on):
    stale = Group.objects.create(name="left-team")
    login(client, "alice", "alice-pw")
    alice = User.objects.get(username="alice")
    alice.groups.add(stale)
    client.logout()

    login(client, "alice", "alice-pw")

    assert "left-team" not in set(alice.groups.values_list("name", flat=True))


def test_http_basic_on_the_api_checks_the_directory(ldap_on):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION="Basic " + __import__("base64").b64encode(b"alice:alice-pw").decode()
    )
    assert client.get("/api/me").json()["username"] == "alice"
    client.credentials(HTTP_AUTHORIZATION="Basic " + __import__("base64").b64encode(b"alice:nope").decode())
    assert client.get("/api/me").status_code == 401


def test_require_group_is_optional(client, settings, directory, db):
    apply_ldap(settings, directory.uri, require_group="")

    assert login(client, "carol", "carol-pw").status_code == 302


def test_posix_group_type_is_accepted(settings, directory):
    from portal.accounts.ldap_config import auth_ldap_settings

    values = auth_ldap_settings(
        server_uri=directory.uri,
        user_search_base="ou=people",
        group_search_base=GROUPS_DN,
        group_type="posixGroup",
    )
    assert values["AUTH_LDAP_GROUP_SEARCH"].filterstr == "(objectClass=posixGroup)"
