"""Disabling an executor sends the flows routed through it back to the compiler, where each
goes to pending unless another executor can carry it: staff are told how many first and asked.
Enabling stays one click (it takes nothing away)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.flows import services as flow_services
from portal.flows.models import FlowConfig
from portal.topology import services
from portal.topology.models import SpecExecutor
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def save_flow(owner, name: str, source: str, destination: str) -> FlowConfig:
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "team",
            "flow_name": name,
            "source": source,
            "destinations": [destination],
            "properties": {"source.files.format": "csv"},
        },
    )
    assert flow.compilation_status == "COMPILED", flow.compilation_message
    return flow


@pytest.fixture
def routed(staff):
    """Two flows run through "ingest" (one of them over two hops), one through "archive"."""
    nodes("landing", "lake", "cold")
    executor("ingest", "landing>lake")
    executor("archive", "lake>cold")
    save_flow(staff, "daily", "landing", "lake")
    save_flow(staff, "to-cold", "landing", "cold")
    save_flow(staff, "lake-copy", "lake", "cold")


def test_the_count_is_one_query_over_the_hop_index(routed):
    ingest = SpecExecutor.objects.get(name="ingest")
    with CaptureQueriesContext(connection) as queries:
        counted = services.flows_routed_through(ingest)
    assert counted == 2
    assert len(queries) == 1 and "COUNT(" in queries[0]["sql"].upper()
    assert services.flows_routed_through(SpecExecutor.objects.get(name="archive")) == 2


def test_staff_are_told_how_many_flows_go_to_pending_and_asked_before_disabling(staff, routed):
    client = client_for(staff)
    detail = client.get("/topology/executors/ingest/").content.decode()
    assert 'href="/topology/executors/ingest/disable/">Disable…</a>' in detail
    asked = client.get("/topology/executors/ingest/disable/")
    page = asked.content.decode()
    assert asked.status_code == 200
    assert "Disable executor ingest?" in page
    assert "2 flows will go to pending" in page
    assert 'href="/topology/executors/ingest/">Cancel</a>' in page
    assert SpecExecutor.objects.get(name="ingest").enabled is True

    done = client.post("/topology/executors/ingest/disable/")
    assert done.status_code == 302 and done["Location"] == "/topology/executors/ingest/"
    assert SpecExecutor.objects.get(name="ingest").enabled is False
    shown = client.get(done["Location"]).content.decode()
    assert "Executor ingest disabled; the flows routed through it are being recompiled." in shown
    assert "not used by the compiler (disabled)" in shown


def test_a_one_click_toggle_of_an_enabled_executor_only_leads_to_the_question(staff, routed):
    client = client_for(staff)
    response = client.post("/topology/executors/ingest/toggle/")
    assert response.status_code == 302 and response["Location"] == "/topology/executors/ingest/disable/"
    assert SpecExecutor.objects.get(name="ingest").enabled is True


def test_an_executor_no_flow_uses_says_so_and_enabling_is_one_click(staff):
    nodes("a", "b")
    executor("spare", "a>b")
    client = client_for(staff)
    page = client.get("/topology/executors/spare/disable/").content.decode()
    assert "No flow is routed through spare" in page
    client.post("/topology/executors/spare/disable/")
    assert SpecExecutor.objects.get(name="spare").enabled is False
    again = client.get("/topology/executors/spare/disable/")
    assert again.status_code == 302 and SpecExecutor.objects.get(name="spare").enabled is False
    assert client.post("/topology/executors/spare/toggle/").status_code == 302
    assert SpecExecutor.objects.get(name="spare").enabled is True


@pytest.mark.parametrize("method", ["get", "post"])
def test_only_staff_reach_the_question(outsider, method):
    nodes("a", "b")
    executor("spare", "a>b")
    assert getattr(client_for(outsider), method)("/topology/executors/spare/disable/").status_code == 403
    assert SpecExecutor.objects.get(name="spare").enabled is True


def test_the_edit_form_says_what_unticking_enabled_does(staff, routed):
    client = client_for(staff)
    page = client.get("/topology/executors/ingest/edit/").content.decode()
    assert "Unticked, the 2 flows routed through it go to pending" in page
    nodes("spare-a", "spare-b")
    executor("spare", "spare-a>spare-b")
    assert (
        "No flow is routed through it now." in client.get("/topology/executors/spare/edit/").content.decode()
    )
