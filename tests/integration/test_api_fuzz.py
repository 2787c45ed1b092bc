"""Schemathesis throws generated requests at every documented operation: the
API must answer each with a 2xx/4xx, never a 500. Bounded to a few hundred
examples so the suite stays quick."""

from __future__ import annotations

import base64

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import override_settings
from hypothesis import HealthCheck, settings

from portal.wsgi import application
from tests.factories import PASSWORD, FlowConfigFactory, UserFactory

# The schema is for signed-in users (or everyone with API_SCHEMA_PUBLIC); it is read here, at
# collection, before the test database holds any user.
with override_settings(API_SCHEMA_PUBLIC=True):
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)


@pytest.fixture
def keep_test_connection():
    """Raw WSGI calls fire request_finished, whose handler closes the DB
    connection — and with it the test's transaction. Django's test client
    detaches that handler during a request; so do we."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def fuzzer_headers(db, keep_test_connection) -> dict[str, str]:
    user = UserFactory(username="fuzzer", is_staff=True)
    FlowConfigFactory(flow_group="sales", flow_name="orders", owner=user)
    token = base64.b64encode(f"fuzzer:{PASSWORD}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@schema.parametrize()
@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)
def test_no_operation_answers_with_a_server_error(case, fuzzer_headers):
    response = case.call(headers=fuzzer_headers)
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} → {response.status_code}: {response.text[:500]}"
    )
