"""A newcomer who signs in lands on the dashboard: until they own a flow, it opens with what to do
first, each step linked and the ones done ticked; once they have a flow, it is gone."""

from __future__ import annotations

import pytest

from portal.orchestration.models import FlowExecution
from portal.topology import services as topology
from tests.factories import PASSWORD, FlowConfigFactory

pytestmark = pytest.mark.django_db


def test_a_newcomer_sees_the_first_steps_until_they_own_a_flow(client, owner):
    client.force_login(owner)
    page = client.get("/monitoring/").content.decode()
    steps = page[page.index('id="first-steps"') :]
    assert 'href="/topology/datanodes/new/">Register your database or folder</a>' in steps
    assert 'href="/flows/new/">Create the flow</a>' in steps and "Test connection" in steps
    assert '<li class="done">' not in steps

    topology.create_data_node(
        {"name": "my-folder", "kind": "files", "properties": {"path": "users/olivia/in"}}, user=owner
    )
    steps = client.get("/monitoring/").content.decode()
    assert (
        '<li class="done"><span aria-hidden="true">✓</span> <span class="visually-hidden">Done: </span>'
        in (steps)
    )

    FlowConfigFactory(owner=owner)
    assert 'id="first-steps"' not in client.get("/monitoring/").content.decode()


def test_the_refreshing_part_does_not_repeat_them(client, owner):
    client.force_login(owner)
    assert (
        'id="first-steps"' not in client.get("/monitoring/", headers={"HX-Request": "true"}).content.decode()
    )


def test_a_first_login_lands_on_the_start_page_with_the_next_step(client, owner):
    signed_in = client.post("/login/", {"username": "olivia", "password": PASSWORD}, follow=True)
    assert signed_in.redirect_chain == [("/", 302), ("/monitoring/start/", 302)]
    page = signed_in.content.decode()
    assert "<strong>Your next step:</strong> add a source data node" in page
    assert '<li id="step-source" aria-current="step" class="current">' in page
    assert 'href="/topology/datanodes/">Data nodes (sources &amp; destinations)</a>' in page
    assert 'id="dashboard-live"' not in page  # not the operator's dashboard


def test_with_a_node_of_their_own_the_next_step_is_the_flow_and_home_is_the_dashboard(client, owner):
    client.force_login(owner)
    topology.create_data_node(
        {"name": "my-folder", "kind": "files", "properties": {"path": "users/olivia/in"}}, user=owner
    )
    assert client.get("/")["Location"] == "/monitoring/"
    page = client.get("/monitoring/start/").content.decode()
    assert "<strong>Your next step:</strong> create a flow." in page
    assert '<li id="step-flow" aria-current="step" class="current">' in page
    assert 'href="/topology/datanodes/my-folder/">my-folder</a> (files)' in page


def test_an_owner_of_a_shared_node_is_no_newcomer(client, owner):
    topology.create_data_node(
        {
            "name": "shop",
            "kind": "files",
            "properties": {"path": "var/shop"},
            "acl": [{"role": "owner", "user": "olivia"}],
        }
    )
    client.force_login(owner)
    assert client.get("/")["Location"] == "/monitoring/"


def test_with_a_flow_the_next_step_is_its_run_and_then_where_the_data_went(client, owner):
    client.force_login(owner)
    flow = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders")
    page = client.get("/monitoring/start/").content.decode()
    assert "run your flow and see where its data went" in page
    assert 'href="/flows/sales/orders/">the flow' in page
    FlowExecution.objects.create(
        flow=flow,
        flow_group="sales",
        flow_name="orders",
        execution_id=1,
        trigger="RUN_NOW",
        status="COMMITTED",
    )
    page = client.get("/monitoring/start/").content.decode()
    assert "<strong>You are set:</strong>" in page
    assert 'href="/executions/sales/orders/1/">' in page
