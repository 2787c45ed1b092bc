"""People every story needs: an owner, a teammate, an outsider and staff."""

from __future__ import annotations

import os

import pytest
from rest_framework.test import APIClient

from tests.factories import UserFactory

# The test suite's own sources and operators (tests.integration.sources.CountingSource, …) are
# loadable by dotted path in the test environment only: a running portal allows portal.pipeline and
# what its operator lists (docs/security.md). Set before anything starts, so the workers, schedulers
# and web servers the tests spawn inherit it.
os.environ["FLOWPORT_PIPELINE_PACKAGES"] = "tests"
# Processes the tests start (web, worker, scheduler) compile flows over nodes without grants.
os.environ["DATA_NODE_DEFAULT_ACCESS"] = "open"


@pytest.fixture(autouse=True)
def _open_data_nodes(settings):
    """Stories about flows, not about grants: a data node without grants is open to every user
    (production's default is closed; tests/security/ runs with it closed)."""
    settings.DATA_NODE_DEFAULT_ACCESS = "open"


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """PBKDF2 is slow on purpose; tests log in hundreds of times."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def owner(db):
    return UserFactory(username="olivia")


@pytest.fixture
def outsider(db):
    return UserFactory(username="oscar")


@pytest.fixture
def staff(db):
    return UserFactory(username="stella", is_staff=True)


def api_client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def api(owner) -> APIClient:
    """The owner's API client."""
    return api_client_for(owner)
