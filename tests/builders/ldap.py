"""Settings that point the portal's LDAP login at the test directory (tests/ldap_server.py)."""

from __future__ import annotations

from portal.accounts.ldap_config import auth_ldap_settings
from tests import ldap_server


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
