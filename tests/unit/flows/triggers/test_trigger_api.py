"""Stories of the triggers API and page: an owner sets a flow's upstream datasets, mode, debounce,
file watch and freshness goal; bad input is a 400 naming each field; both flows' pages say what
feeds what; a webhook token is shown once and runs the flow when a script POSTs with it."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from portal.flows.triggers.models import FlowTrigger
from portal.orchestration.models import FlowExecution
from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def flows(owner):
    orders = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders", schedule="")
    report = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="report", schedule="")
    return orders, report


def test_the_owner_sets_triggers_and_both_pages_show_them(api, client, owner, flows):
    response = api.put(
        "/api/flowconfigs/sales/report/triggers",
        {"upstream": ["sales/orders"], "upstreamMode": "all", "debounceSeconds": 30, "freshness": "by 06:00"},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["upstream"] == ["sales/orders"] and body["upstreamMode"] == "all"
    assert body["debounceSeconds"] == 30 and body["freshness"] == "by 06:00"
    assert body["runsWhen"] == ["sales/orders commits, 30 s after the last commit (debounce)"]
    assert body["datasetFreshness"] == {}
    response = api.patch(
        "/api/flowconfigs/sales/report/triggers",
        {"datasetFreshness": {"public.orders": "within 30m"}},
        format="json",
    )
    assert response.json()["datasetFreshness"] == {"public.orders": "within 30m"}
    assert response.json()["freshness"] == "by 06:00"  # a PATCH leaves the rest as it was
    response = api.patch(
        "/api/flowconfigs/sales/report/triggers", {"datasetFreshness": {"x": "soon"}}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["datasetFreshness"][0].startswith("x: not a freshness goal: 'soon'")
    assert api.get("/api/flowconfigs/sales/orders/triggers").json()["feeds"] == ["sales/report"]

    client.force_login(owner)
    upstream_page = client.get("/flows/sales/orders/").content.decode()
    assert (
        '<dt>Feeds</dt><dd data-test="feeds"><a href="/flows/sales/report/">sales/report</a>' in upstream_page
    )
    downstream_page = client.get("/flows/sales/report/").content.decode()
    assert "<dt>Runs when</dt>" in downstream_page and "<li>sales/orders commits" in downstream_page
    assert (
        "<li>runs when" not in downstream_page
    )  # said once, by the heading and "committed by 06:00" in downstream_page


def test_bad_input_is_a_400_naming_each_field(api, flows):
    response = api.put(
        "/api/flowconfigs/sales/report/triggers",
        {"upstream": ["sales/missing"], "freshness": "whenever", "debounceSeconds": -5, "colour": "red"},
        format="json",
    )
    assert response.status_code == 400
    assert response.json() == {"colour": ["Unknown field."]}
    response = api.put(
        "/api/flowconfigs/sales/report/triggers",
        {"upstream": ["sales/missing"], "freshness": "whenever", "upstreamMode": "most"},
        format="json",
    )
    assert response.status_code == 400
    errors = response.json()
    assert errors["upstreamMode"] == ['"most" is not a valid choice.']
    response = api.put(
        "/api/flowconfigs/sales/report/triggers",
        {"upstream": ["sales/missing"], "freshness": "whenever", "onFiles": True},
        format="json",
    )
    errors = response.json()
    assert response.status_code == 400
    assert errors["upstream"] == ["sales/missing: no such flow."]
    assert errors["freshness"][0].startswith("Not a freshness goal: 'whenever'")
    assert "onFiles" in errors
    assert not FlowTrigger.objects.filter(upstreams__isnull=False).exists()


def test_someone_who_may_not_change_the_flow_cannot_set_its_triggers(outsider, flows):
    outsider_api = api_client_for(outsider)
    assert outsider_api.get("/api/flowconfigs/sales/report/triggers").status_code == 200  # seeing is allowed
    response = outsider_api.put(
        "/api/flowconfigs/sales/report/triggers", {"upstream": ["sales/orders"]}, format="json"
    )
    assert response.status_code == 403
    assert outsider_api.post("/api/flowconfigs/sales/report/webhook-token").status_code == 403
    assert not FlowTrigger.objects.exists()


def test_the_page_form_shows_the_services_errors_beside_their_fields(client, owner, flows):
    client.force_login(owner)
    response = client.post(
        "/flows/sales/report/triggers/",
        {"upstream": "sales/missing", "upstream_mode": "any", "debounce_seconds": "0", "freshness": "by 6pm"},
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "sales/missing: no such flow." in page and "Not a freshness goal: &#x27;by 6pm&#x27;" in page
    response = client.post(
        "/flows/sales/report/triggers/",
        {
            "upstream": "sales/orders",
            "upstream_mode": "any",
            "debounce_seconds": "0",
            "freshness": "within 2h",
        },
    )
    assert response.status_code == 302 and response["Location"] == "/flows/sales/report/"


def test_a_webhook_token_is_shown_once_stored_hashed_and_runs_the_flow(api, flows):
    created = api.post("/api/flowconfigs/sales/report/webhook-token")
    assert created.status_code == 201
    token = created.json()["token"]
    assert token.startswith("fpw_") and created.json()["url"].endswith("/api/hooks/flows/sales/report")
    trigger = FlowTrigger.objects.get(flow__flow_name="report")
    assert token not in (trigger.webhook_token_hash, trigger.webhook_token_hint)
    shown = api.get("/api/flowconfigs/sales/report/triggers").json()
    assert shown["webhook"] is True and token not in str(shown)

    script = APIClient()  # no session, no API token: the webhook token alone
    response = script.post("/api/hooks/flows/sales/report", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 202
    run = FlowExecution.objects.get(execution_id=response.json()["flowExecutionId"])
    assert (run.flow_name, run.trigger, run.requested_by) == ("report", "WEBHOOK", "webhook")

    assert api.delete("/api/flowconfigs/sales/report/webhook-token").status_code == 204
    assert (
        script.post("/api/hooks/flows/sales/report", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 404
    )
    assert api.delete("/api/flowconfigs/sales/report/webhook-token").status_code == 404


def test_a_paused_flow_answers_its_webhook_409_and_runs_nothing(api, flows):
    token = api.post("/api/flowconfigs/sales/report/webhook-token").json()["token"]
    api.patch("/api/flowconfigs/sales/report", {"paused": True}, format="json")
    response = APIClient().post("/api/hooks/flows/sales/report", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 409 and "paused" in response.json()["detail"]
    assert not FlowExecution.objects.filter(trigger="WEBHOOK").exists()


def test_deleting_a_flow_that_feeds_another_says_so_first(api, client, owner, flows):
    """The delete page names the flows that start on this one's commits and says the watermarks are
    not carried over to a flow made again under the same name."""
    response = api.put(
        "/api/flowconfigs/sales/report/triggers", {"upstream": ["sales/orders"]}, format="json"
    )
    assert response.status_code == 200, response.content
    client.force_login(owner)

    page = client.get("/flows/sales/orders/delete/").content.decode()
    assert "1 flow downstream of this one:" in page
    assert '<a href="/flows/sales/report/">sales/report</a> starts when it commits' in page
    assert "It will no longer start on its commits" in page
    assert "a flow created again as <code>sales/orders</code> reads its sources from the beginning" in page

    quiet = client.get("/flows/sales/report/delete/").content.decode()
    assert 'data-test="feeds-on-delete"' not in quiet  # feeds nothing

    assert client.post("/flows/sales/orders/delete/").status_code == 302  # the page asked already
    assert api.get("/api/flowconfigs/sales/report/triggers").json()["upstream"] == []
