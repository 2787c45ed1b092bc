"""A scheduled flow's page says "Run immediately: no" only beside what happened: when a save did
run it (it was saved without a schedule, or with the flag on), the page says which execution."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.orchestration.models import FlowExecution
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import FlowExecutionFactory

pytestmark = pytest.mark.django_db


def test_a_flow_a_save_ran_says_so_beside_run_immediately_no(owner):
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner, schedule="0 * * * *")
    ran = FlowExecutionFactory(flow=flow, trigger=FlowExecution.Trigger.RUN_IMMEDIATELY, status="COMMITTED")
    browser = Client()
    browser.force_login(owner)
    page = browser.get("/flows/sales/orders/").content.decode()
    said = page[page.index('data-test="run-immediately"') :]
    said = said[: said.index("</dd>")]
    assert "no: saving it does not run it" in said
    assert f"execution {ran.execution_id}" in said and "without a schedule" in said


def test_a_flow_no_save_ran_says_only_no(owner):
    FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner, schedule="0 * * * *")
    browser = Client()
    browser.force_login(owner)
    page = browser.get("/flows/sales/orders/").content.decode()
    said = page[page.index('data-test="run-immediately"') :]
    assert "a save last ran it" not in said[: said.index("</dd>")]
