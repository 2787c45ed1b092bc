"""A real slapd for the whole session, and per-test settings pointing at it."""

from __future__ import annotations

import pytest

from portal.accounts.ldap_config import auth_ldap_settings
from tests import ldap_server


@pytest.fixture(scope="session")
def directory():
    with ldap_server.LdapServer() as server:
        yield server


def ldap_settings_for(uri: str, **overrides) -> dict:
    values = {
        "server_uri": uri,
        "bind_dn": ldap_server.BIND_DN,
        "bind_password": ldap_server.BIND_PASSWORD,
        "user_search_base": ldap_server.PEOPLE_DN,
        "group_search_base": ldap_server.GROUPS_DN,
        "group_type": "nested_groupOfNames",
        "require_group": f"cn=flowport-users,{ldap_server.GROUPS_DN}",
        "staff_group": f"cn=flowport-staff,{ldap_server.GROUPS_DN}",
        "superuser_group": f"cn=flowport-admins,{ldap_server.GROUPS_DN}",
        "timeout": 2,
    }
    values.update(overrides)
    return auth_ldap_settings(**values)


def apply_ldap(settings, uri: str, **overrides) -> None:
    for name, value in ldap_settings_for(uri, **overrides).items():
        setattr(settings, name, value)
    settings.AUTHENTICATION_BACKENDS = [
        "portal.accounts.backends.DirectoryBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]


@pytest.fixture
def ldap_on(settings, directory, db):
    """Flowport configured for the fixture directory, as the env vars would."""
    apply_ldap(settings, directory.uri)
    return directory
