"""The flow page's "Runs when" reads as a sentence when no data trigger starts the flow."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db


def runs_when(owner, **fields) -> str:
    FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner, **fields)
    browser = Client()
    browser.force_login(owner)
    page = browser.get("/flows/sales/orders/").content.decode()
    said = page[page.index("<dt>Runs when</dt>") :]
    return said[: said.index("</dd>")]


def test_a_scheduled_flow_runs_when_its_ticks_come(owner):
    said = runs_when(owner, schedule="0 * * * *")
    assert "its schedule&#x27;s ticks come" in said or "its schedule's ticks come" in said
    assert "says" not in said


def test_a_flow_without_schedule_runs_when_someone_presses_run_now(owner):
    assert "someone presses <strong>Run now</strong>" in runs_when(owner, schedule="")


def test_a_scheduled_flow_with_a_data_trigger_names_both(owner):
    FlowConfigFactory(flow_group="sales", flow_name="upstream", owner=owner, schedule="")
    api = api_client_for(owner)
    runs_when(owner, schedule="0 * * * *")
    answer = api.put(
        "/api/flowconfigs/sales/orders/triggers", {"upstream": ["sales/upstream"]}, format="json"
    )
    assert answer.status_code == 200, answer.content
    browser = Client()
    browser.force_login(owner)
    page = browser.get("/flows/sales/orders/").content.decode()
    said = page[page.index("<dt>Runs when</dt>") :]
    said = said[: said.index("</dd>")]
    assert "<li>its schedule's ticks come</li><li>sales/upstream commits" in said
