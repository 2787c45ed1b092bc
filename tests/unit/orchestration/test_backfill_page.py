"""Stories of backfilling a dataset from the flow's pages: pick one of
the flow's datasets, give a watermark range, and an execution reads it again."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.orchestration.models import DatasetState, FlowExecution
from tests.factories import FlowConfigFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def flow(owner):
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    DatasetState.objects.create(
        flow_group="sales",
        flow_name="orders",
        job_name="sales.orders.1-a-to-b",
        dataset_urn="orders",
        watermark="120",
    )
    return flow


@pytest.fixture
def browser(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


URL = "/executions/sales/orders/backfill/"


def test_the_owner_backfills_a_dataset_of_the_flow(browser, flow):
    page = browser.get(URL + "?dataset=orders").content.decode()
    assert '<option value="orders">' in page and 'value="orders"' in page
    assert "<code>120</code>" in page
    response = browser.post(URL, {"dataset": "orders", "low": "", "high": "100"})
    execution = FlowExecution.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"/{execution.execution_id}/")
    assert execution.trigger == FlowExecution.Trigger.BACKFILL
    assert execution.backfill == {"orders": {"low": None, "high": "100"}}
    assert DatasetState.objects.get().watermark == "120"  # the stored watermark does not move


def test_the_flow_page_offers_backfill_to_who_may_run_it(browser, flow):
    fragment = browser.get("/executions/sales/orders/", HTTP_HX_REQUEST="true").content.decode()
    assert f'href="{URL}"' in fragment


def test_a_backfill_without_a_high_watermark_says_so(browser, flow):
    response = browser.post(URL, {"dataset": "orders", "low": "5", "high": " "})
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()
    assert not FlowExecution.objects.exists()


def test_strangers_cannot_backfill_someone_elses_flow(flow):
    stranger = Client()
    stranger.force_login(UserFactory())
    assert stranger.get(URL).status_code == 403
    assert stranger.post(URL, {"dataset": "orders", "high": "1"}).status_code == 403
    assert not FlowExecution.objects.exists()


def test_the_page_costs_the_same_queries_for_many_datasets(browser, flow):
    with CaptureQueriesContext(connection) as few:
        browser.get(URL)
    DatasetState.objects.bulk_create(
        DatasetState(flow_group="sales", flow_name="orders", job_name="j", dataset_urn=f"t{i}")
        for i in range(30)
    )
    with CaptureQueriesContext(connection) as many:
        browser.get(URL)
    assert len(many.captured_queries) == len(few.captured_queries)
