"""A real slapd for the whole session, and per-test settings pointing at it."""

from __future__ import annotations

import pytest

from tests import ldap_server
from tests.builders.ldap import apply_ldap


@pytest.fixture(scope="session")
def directory():
    with ldap_server.LdapServer() as server:
        yield server


@pytest.fixture
def ldap_on(settings, directory, db):
    """Flowport configured for the fixture directory, as the env vars would."""
    apply_ldap(settings, directory.uri)
    return directory
