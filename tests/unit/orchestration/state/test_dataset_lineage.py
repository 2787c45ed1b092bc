"""Stories of a dataset page's lineage: it is the dataset's own — where its job reads it from
(and which flow writes that), where it delivers it, and which flows read what it delivered — not
its job's source called "this dataset"."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import Client

from portal.orchestration.models import DatasetState, LineageEdge
from portal.topology import services
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def lake(db):
    """The files node whose root holds every folder of these stories."""
    return services.create_data_node({"name": "lake", "kind": "files", "properties": {"path": "/lake"}})


SEEN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def flow_reading(owner, name: str, source: str, target: str) -> DatasetState:
    """A flow whose job `copy` read folder `source` and delivered `target` (its recorded edge)."""
    flow = FlowConfigFactory(flow_group="team", flow_name=name, owner=owner)
    execution = FlowExecutionFactory(flow=flow, status="COMMITTED")
    JobExecutionFactory(
        execution=execution,
        job_name="copy",
        status="COMMITTED",
        spec={"properties": {"source.files.path": source}},
    )
    LineageEdge.objects.create(
        source_namespace="file",
        source_name=source,
        target_namespace="file",
        target_name=target,
        flow_group="team",
        flow_name=name,
        job_name="copy",
        execution_id=execution.execution_id,
        seen=SEEN,
    )
    return DatasetState.objects.create(
        flow_id=flow.pk, flow_group="team", flow_name=name, job_name="copy", dataset_urn="orders"
    )


def section(page: str, test_id: str) -> str:
    """The part of the page from `test_id` to the end of its paragraph or list."""
    start = page.index(f'data-test="{test_id}"')
    end = "</p>" if test_id == "lineage-source" else "</ul>"
    return page[start : page.index(end, start)]


def test_the_dataset_page_tells_its_source_its_destination_and_who_reads_it(owner):
    flow_reading(owner, "ingest", "/lake/raw/orders", "/lake/landing/orders")  # upstream
    state = flow_reading(owner, "clean", "/lake/landing/orders", "/lake/clean/orders")
    flow_reading(owner, "report", "/lake/clean/orders", "/lake/marts/orders")  # downstream
    browser = Client()
    browser.force_login(owner)
    page = browser.get(f"/monitoring/datasets/team/clean/copy/{state.dataset_urn}/").content.decode()

    assert "This dataset:" not in page
    assert "lake:landing/orders" in section(page, "lineage-source")  # relative to the node's root
    assert "team/ingest" in section(page, "fed-by")  # which flow writes its source
    delivered = section(page, "delivered-to")
    assert "lake:clean/orders" in delivered and "landing" not in delivered
    readers = section(page, "feeds")
    assert "team/report" in readers and "lake:marts/orders" in readers
    assert "/lake/" not in page  # no server path for a user who is not staff
    assert "team/clean" not in readers  # its own job is not its own consumer


def test_a_dataset_whose_job_delivered_nothing_yet_says_so(owner):
    state = flow_reading(owner, "clean", "/lake/landing/orders", "/lake/clean/orders")
    LineageEdge.objects.all().delete()  # its first run has not committed
    browser = Client()
    browser.force_login(owner)
    page = browser.get(f"/monitoring/datasets/team/clean/copy/{state.dataset_urn}/").content.decode()
    assert "lake:landing/orders" in section(page, "lineage-source")
    assert "No committed run of this job has delivered it yet." in page
    assert "No committed run has read what it delivered yet." in page


def test_staff_read_the_server_paths(owner):
    state = flow_reading(owner, "clean", "/lake/landing/orders", "/lake/clean/orders")
    browser = Client()
    browser.force_login(type(owner).objects.create(username="stella", is_staff=True))
    page = browser.get(f"/monitoring/datasets/team/clean/copy/{state.dataset_urn}/").content.decode()
    assert "/lake/landing/orders" in section(page, "lineage-source")
    assert "/lake/clean/orders" in section(page, "delivered-to")
