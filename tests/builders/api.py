"""An API client signed in as a user (or anonymous), as the stories call the REST API."""

from __future__ import annotations

from rest_framework.test import APIClient


def api_client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client
