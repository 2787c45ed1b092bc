"""Turn Flowport's LDAP environment variables into django-auth-ldap settings.

Kept apart from settings.py so the tests can build the very same settings for
the slapd they start, instead of a second hand-written copy.
"""

from __future__ import annotations

from typing import Any

import ldap
from django.core.exceptions import ImproperlyConfigured
from django_auth_ldap.config import (
    GroupOfNamesType,
    GroupOfUniqueNamesType,
    LDAPSearch,
    NestedGroupOfNamesType,
    PosixGroupType,
)

# LDAP_GROUP_TYPE value (case-insensitive) → (group type, objectClass searched)
GROUP_TYPES = {
    "groupofnames": (GroupOfNamesType, "groupOfNames"),
    "nested_groupofnames": (NestedGroupOfNamesType, "groupOfNames"),
    "nestedgroupofnames": (NestedGroupOfNamesType, "groupOfNames"),
    "groupofuniquenames": (GroupOfUniqueNamesType, "groupOfUniqueNames"),
    "posixgroup": (PosixGroupType, "posixGroup"),
}


def auth_ldap_settings(
    *,
    server_uri: str,
    bind_dn: str = "",
    bind_password: str = "",
    user_search_base: str,
    user_filter: str = "(uid=%(user)s)",
    group_search_base: str = "",
    group_type: str = "groupOfNames",
    require_group: str = "",
    staff_group: str = "",
    superuser_group: str = "",
    start_tls: bool = False,
    timeout: int = 5,
) -> dict[str, Any]:
    """The AUTH_LDAP_* settings. Usernames go into the filter through
    LDAPSearch, which escapes them, so `*)(uid=*` matches nobody."""
    if not user_search_base:
        raise ImproperlyConfigured("LDAP_SERVER_URI is set but LDAP_USER_SEARCH_BASE is empty.")
    if "%(user)s" not in user_filter:
        raise ImproperlyConfigured("LDAP_USER_FILTER must contain %(user)s.")
    try:
        type_class, object_class = GROUP_TYPES[group_type.lower()]
    except KeyError:
        raise ImproperlyConfigured(
            f"LDAP_GROUP_TYPE={group_type!r} is not one of: {', '.join(sorted(GROUP_TYPES))}."
        ) from None
    values: dict[str, Any] = {
        "AUTH_LDAP_SERVER_URI": server_uri,
        "AUTH_LDAP_BIND_DN": bind_dn,
        "AUTH_LDAP_BIND_PASSWORD": bind_password,
        "AUTH_LDAP_START_TLS": start_tls,
        "AUTH_LDAP_USER_SEARCH": LDAPSearch(user_search_base, ldap.SCOPE_SUBTREE, user_filter),
        "AUTH_LDAP_USER_ATTR_MAP": {"first_name": "givenName", "last_name": "sn", "email": "mail"},
        "AUTH_LDAP_ALWAYS_UPDATE_USER": True,
        "AUTH_LDAP_CONNECTION_OPTIONS": {
            ldap.OPT_NETWORK_TIMEOUT: timeout,
            ldap.OPT_TIMEOUT: timeout,
            ldap.OPT_REFERRALS: 0,
        },
        "AUTH_LDAP_CACHE_TIMEOUT": 0,
    }
    if group_search_base:
        values["AUTH_LDAP_GROUP_SEARCH"] = LDAPSearch(
            group_search_base, ldap.SCOPE_SUBTREE, f"(objectClass={object_class})"
        )
        values["AUTH_LDAP_GROUP_TYPE"] = type_class(name_attr="cn")
        # Group memberships become Django groups at every login: pack ACLs and
        # the proxy group name groups, whichever directory they came from.
        values["AUTH_LDAP_MIRROR_GROUPS"] = True
        flags = {}
        if staff_group:
            flags["is_staff"] = staff_group
        if superuser_group:
            flags["is_superuser"] = superuser_group
        values["AUTH_LDAP_USER_FLAGS_BY_GROUP"] = flags
        if require_group:
            values["AUTH_LDAP_REQUIRE_GROUP"] = require_group
    elif require_group or staff_group or superuser_group:
        raise ImproperlyConfigured("LDAP group settings need LDAP_GROUP_SEARCH_BASE.")
    return values
