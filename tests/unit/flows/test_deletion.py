"""Deleting a flow that feeds another says so first: the page and the API name the flows
downstream of it (those that start on its commits, and those whose runs read what it wrote) and
the datasets whose watermarks go with it; the API deletes such a flow only when asked again with
?confirm=true, and a flow that feeds nothing is deleted at once, as before."""

from __future__ import annotations

import pytest
from django.utils import timezone

from portal.flows import deletion
from portal.flows.models import FlowConfig
from portal.orchestration.models import DatasetState, LineageEdge
from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(owner):
    return FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders", schedule="")


def _reads(reader: FlowConfig, writer: FlowConfig, dataset: str = "/data/lake/sales/orders/orders") -> None:
    """Recorded runs: `writer` wrote the dataset, `reader` read it."""
    for flow, source, target in (
        (writer, "db.public.orders", dataset),
        (reader, dataset, "db.public.report"),
    ):
        LineageEdge.objects.create(
            source_namespace="file://",
            source_name=source,
            target_namespace="file://",
            target_name=target,
            flow_group=flow.flow_group,
            flow_name=flow.flow_name,
            job_name="j",
            execution_id=1,
            seen=timezone.now(),
        )


def test_a_flow_that_reads_another_ones_output_is_downstream_of_it(owner, orders):
    report = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="report", schedule="")
    _reads(report, orders)

    found = deletion.impact(orders, owner)

    assert [(d.flow, d.how) for d in found.downstream] == [(report, "reads what it writes")]
    assert deletion.impact(report, owner).downstream == []  # nothing reads the report's output


def test_the_page_names_downstream_flows_and_the_watermarks_that_go(client, owner, orders):
    api = api_client_for(owner)
    FlowConfigFactory(owner=owner, flow_group="sales", flow_name="report", schedule="")
    assert (
        api.put(
            "/api/flowconfigs/sales/report/triggers", {"upstream": ["sales/orders"]}, format="json"
        ).status_code
        == 200
    )
    DatasetState.objects.create(
        flow_id=orders.pk,
        flow_group="sales",
        flow_name="orders",
        job_name="j",
        dataset_urn="orders",
        watermark="2026-12-01 10:00:00",
    )
    client.force_login(owner)

    page = client.get("/flows/sales/orders/delete/").content.decode()

    assert "1 flow downstream of this one:" in page
    assert '<a href="/flows/sales/report/">sales/report</a> starts when it commits' in page
    assert "Its watermarks go with it: where it stopped reading 1 dataset (<code>orders</code>)" in page


def test_the_api_asks_for_confirmation_before_deleting_a_flow_that_feeds_another(owner, orders):
    api = api_client_for(owner)
    FlowConfigFactory(owner=owner, flow_group="sales", flow_name="report", schedule="")
    assert (
        api.put(
            "/api/flowconfigs/sales/report/triggers", {"upstream": ["sales/orders"]}, format="json"
        ).status_code
        == 200
    )

    refused = api.delete("/api/flowconfigs/sales/orders")

    assert refused.status_code == 409
    body = refused.json()
    assert body["downstreamFlows"] == [
        {"flowGroup": "sales", "flowName": "report", "startsOnCommit": True, "readsOutput": False}
    ]
    assert "sales/report (starts when it commits)" in body["detail"] and "?confirm=true" in body["detail"]
    assert FlowConfig.objects.filter(flow_name="orders").exists()

    assert api.delete("/api/flowconfigs/sales/orders?confirm=true").status_code == 204
    assert not FlowConfig.objects.filter(flow_name="orders").exists()


def test_a_flow_that_feeds_nothing_is_deleted_at_once(owner, orders):
    assert api_client_for(owner).delete("/api/flowconfigs/sales/orders").status_code == 204
