"""Reloading an address a form was sent to (a POST-only view) answers in the site's layout,
saying what happened and the way back; API clients still get JSON."""

from __future__ import annotations

import pytest

from tests.factories import FlowConfigFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def olivia(client):
    user = UserFactory(username="olivia")
    client.force_login(user)
    return user


def test_reloading_a_post_only_address_shows_the_sites_page(client, olivia):
    flow = FlowConfigFactory(owner=olivia, flow_group="sales", flow_name="orders")
    answer = client.get(f"/flows/{flow.flow_group}/{flow.flow_name}/pause/")
    assert answer.status_code == 405
    assert answer["Allow"] == "POST"
    html = answer.content.decode()
    assert "<h1>Not a page to open</h1>" in html
    assert 'aria-label="Main"' in html and "olivia" in html  # the site's navigation, signed in
    assert "Nothing was changed." in html
    assert 'href="/flows/sales/orders/"' in html  # the way back: the flow's page
    flow.refresh_from_db()
    assert not flow.paused


def test_an_api_client_gets_json_for_a_method_the_endpoint_does_not_take(client, olivia):
    answer = client.delete("/api/flowconfigs")
    assert answer.status_code == 405
    assert answer["Content-Type"] == "application/json"
    assert answer.json() == {"detail": 'Method "DELETE" not allowed.'}
