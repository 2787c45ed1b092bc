"""A crash that leaves work undone says so on the flow page: "N datasets waiting to be finished",
each with why and what to do, while a run in the middle of its own commit is not listed."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.orchestration.models import CommitStore, CommitStoreDataset, DatasetState, JobStatus
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.orchestration.factories import JobExecutionFactory

pytestmark = pytest.mark.django_db


def stored(flow, job_name: str, urn: str, execution_id: int, **fields) -> CommitStoreDataset:
    store, _ = CommitStore.objects.get_or_create(
        name=CommitStore.name_for(flow.flow_group, flow.flow_name, job_name, flow.pk)
    )
    return CommitStoreDataset.objects.create(
        store=store, dataset_urn=urn, execution_id=execution_id, job_name=job_name, attempt=1, **fields
    )


def page(user, flow) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(f"/flows/{flow.flow_group}/{flow.flow_name}/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_flow_page_says_which_datasets_wait_why_and_what_to_do():
    owner = UserFactory(username="wanda")
    flow = FlowConfigFactory(owner=owner, flow_group="shop", flow_name="items")
    committing = JobExecutionFactory(execution__flow=flow, job_name="ingest", status=JobStatus.RUNNING)
    stored(flow, "ingest", "audit.items", 11, redo_failures=3, last_error="CommitConflictError: a marker")
    stored(flow, "ingest", "audit.orders", 12)  # its worker died: no job runs execution 12
    stored(flow, "ingest", "audit.lines", committing.execution.execution_id)  # being committed now
    DatasetState.objects.create(
        flow_id=flow.pk, flow_group="shop", flow_name="items", job_name="ingest", dataset_urn="audit.items"
    )

    html = page(owner, flow)
    assert "2 datasets waiting to be finished" in html
    assert "3 redo(s) failed: CommitConflictError: a marker" in html
    assert "the worker of execution 12 (attempt 1) stopped before finishing them" in html
    assert "audit.lines" not in html
    assert "What to do:" in html and "Run now" in html
    assert "open its state page" not in html  # the reset is staff's

    staff = UserFactory(username="stan", is_staff=True)
    assert "open its state page" in page(staff, flow)


def test_a_flow_with_nothing_waiting_shows_nothing():
    owner = UserFactory(username="wanda")
    flow = FlowConfigFactory(owner=owner, flow_group="shop", flow_name="items")
    other = FlowConfigFactory(owner=owner, flow_group="shop", flow_name="items-2")
    stored(other, "ingest", "audit.items", 11, redo_failures=1, last_error="boom")
    assert "waiting to be finished" not in page(owner, flow)


def test_the_flow_status_api_lists_the_same_datasets_with_why():
    owner = UserFactory(username="wanda")
    flow = FlowConfigFactory(owner=owner, flow_group="shop", flow_name="items")
    JobExecutionFactory(execution__flow=flow, job_name="ingest", status=JobStatus.FAILED)
    stored(flow, "ingest", "audit.items", 11, redo_failures=3, last_error="CommitConflictError: a marker")
    client = Client()
    client.force_login(owner)

    status = client.get("/api/flowstatuses/shop/items").json()

    assert status["waitingDatasets"] == [
        {
            "datasetUrn": "audit.items",
            "jobName": "ingest",
            "flowExecutionId": 11,
            "attempt": 1,
            "redoFailures": 3,
            "reason": "3 redo(s) failed: CommitConflictError: a marker",
        }
    ]
