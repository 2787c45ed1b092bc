"""People every story needs: an owner, a teammate, an outsider and staff."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.factories import UserFactory


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
