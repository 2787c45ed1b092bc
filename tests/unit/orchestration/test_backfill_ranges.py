"""Backfill ranges held against what the flow loaded: a range that matches nothing is refused
before anything starts (page and API), saying what exists; the page fills the range's end with the
stored watermark as a person reads it and shows what each destination will replace first."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.flows.models import CompiledJobDag
from portal.orchestration.models import DatasetState, DatasetStateHistory, FlowExecution
from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db

URL = "/executions/sales/orders/backfill/"


@pytest.fixture
def flow(owner):
    """Two loads of orders, by a numeric watermark: (first record, 60], then (60, 120]."""
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    state = DatasetState.objects.create(
        flow_group="sales", flow_name="orders", job_name="hop1", dataset_urn="orders", watermark="120"
    )
    for previous, mark in (("", "60"), ("60", "120")):
        DatasetStateHistory.objects.create(
            state=state, previous_watermark=previous, watermark=mark, status="COMMITTED"
        )
    return flow


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_a_range_after_everything_loaded_is_refused_saying_what_exists(browser, flow):
    response = browser.post(URL, {"dataset": "orders", "low": "200", "high": "300"})
    assert response.status_code == 400
    assert "nothing was loaded after 200: the loads so far cover from the first record up to 120" in (
        response.content.decode()
    )
    assert not FlowExecution.objects.exists()


def test_the_api_refuses_the_same_range_by_its_field(owner, flow):
    api = api_client_for(owner)
    body = {"backfill": {"orders": {"low": "500", "high": "600"}}}
    response = api.post("/api/flowconfigs/sales/orders/run", body, format="json")
    assert response.status_code == 400
    assert "up to 120" in str(response.json()["backfill"])
    reversed_range = {"backfill": {"orders": {"low": "90", "high": "10"}}}
    response = api.post("/api/flowconfigs/sales/orders/run", reversed_range, format="json")
    assert response.status_code == 400 and "is not before high" in str(response.json()["backfill"])


def test_a_dataset_the_flow_never_loaded_is_refused_naming_those_it_did(owner, flow):
    api = api_client_for(owner)
    body = {"backfill": {"nosuch": {"low": "a", "high": "b"}}}
    response = api.post("/api/flowconfigs/sales/orders/run", body, format="json")
    assert response.status_code == 400
    assert "nosuch: the flow has loaded no dataset of that name (its datasets: orders)" in str(
        response.json()["backfill"]
    )
    assert not FlowExecution.objects.exists()


def test_backfill_this_fills_the_range_end_and_the_preview_says_what_is_replaced(browser, flow):
    page = browser.get(URL).content.decode()
    assert "?dataset=orders&amp;high=120" in page
    CompiledJobDag.objects.create(
        flow=flow,
        dag={
            "jobs": [
                {
                    "jobName": "hop1",
                    "destinationNode": "warehouse",
                    "properties": {
                        "flowport.hop.destination.kind": "jdbc",
                        "extract.delta.fields": "updated",
                    },
                },
                {
                    "jobName": "hop2",
                    "destinationNode": "lake",
                    "properties": {
                        "flowport.hop.destination.kind": "files",
                        "writer.partition.columns": "day",
                    },
                },
            ]
        },
    )
    response = browser.post(URL, {"dataset": "orders", "low": "", "high": "100", "preview": "1"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "What this backfill replaces" in html
    assert "the rows of orders with updated in (the first record, 100] are deleted and read again" in html
    assert "the partitions of orders that the rows of (the first record, 100] fall in are replaced" in html
    assert not FlowExecution.objects.exists()  # a preview starts nothing
    started = browser.post(URL, {"dataset": "orders", "low": "", "high": "100"})
    assert started.status_code == 302 and FlowExecution.objects.get().backfill == {
        "orders": {"low": None, "high": "100"}
    }
