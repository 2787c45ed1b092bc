"""The LDAP authentication backend, and how a directory outage is noticed.

django-auth-ldap turns every LDAP error into "no user" (a wrong password, to
the login form). A receiver of its `ldap_error` signal marks the request when
the directory could not be reached, so the login form can say so instead.
"""

from __future__ import annotations

import logging

import ldap
from django.conf import settings
from django.dispatch import receiver
from django.http import HttpRequest
from django_auth_ldap.backend import LDAPBackend, ldap_error

logger = logging.getLogger(__name__)

UNREACHABLE = (ldap.SERVER_DOWN, ldap.TIMEOUT, ldap.CONNECT_ERROR)
DIRECTORY_ERROR_ATTR = "flowport_directory_error"


class DirectoryBackend(LDAPBackend):
    """django-auth-ldap's backend under Flowport's name, so settings and the
    login page refer to one class."""


@receiver(ldap_error)
def remember_directory_outage(sender, context, user, request, exception, **kwargs) -> None:
    if request is not None and isinstance(exception, UNREACHABLE):
        setattr(request, DIRECTORY_ERROR_ATTR, True)
        server = getattr(settings, "AUTH_LDAP_SERVER_URI", "")  # set only when LDAP is configured
        logger.error("LDAP directory %s unreachable during %s", server, context)


def directory_unreachable(request: HttpRequest | None) -> bool:
    return bool(request is not None and getattr(request, DIRECTORY_ERROR_ATTR, False))


def directory_description() -> str:
    """What the login page says about where accounts come from (no secrets:
    the host only, never the bind DN)."""
    uri = getattr(settings, "AUTH_LDAP_SERVER_URI", "")
    if not uri or "portal.accounts.backends.DirectoryBackend" not in settings.AUTHENTICATION_BACKENDS:
        return "Sign in with your Flowport account (local users; no LDAP directory is configured)."
    name = getattr(settings, "LDAP_DIRECTORY_NAME", "") or "LDAP directory"
    return f"Sign in with your {name} account ({uri})."
