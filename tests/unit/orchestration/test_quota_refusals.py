"""A hard quota refuses the request where it is made: the REST API answers 503
naming the quota and whose it is (Gobblin's QuotaExceededException), the Rest.li
resource too, and the pages say so instead of starting anything."""

from __future__ import annotations

import pytest

from portal.flows.models import FlowConfig
from portal.orchestration.models import FlowExecution
from portal.quotas.models import Quota
from tests.builders.api import api_client_for
from tests.builders.restli import Wire
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(db):
    nodes("a", "b")
    executor("x1", "a>b")
    user = UserFactory(username="alice")
    Quota.objects.create(scope=Quota.Scope.USER, user=user, max_executions_per_hour=1)
    return user


@pytest.fixture
def flow(alice):
    return FlowConfigFactory(
        owner=alice, flow_group="demo", flow_name="f", schedule="*/5 * * * *", source="a", destinations=["b"]
    )


def test_the_api_answers_503_naming_the_quota_and_the_user(alice, flow):
    api = api_client_for(alice)
    assert api.post("/api/flowconfigs/demo/f/run").status_code == 202
    refused = api.post("/api/flowconfigs/demo/f/run")
    assert refused.status_code == 503
    assert refused.json() == {
        "detail": "Quota exceeded: alice at 1 of 1 executions started per hour.",
        "quota": "executions started per hour",
        "scope": "USER",
        "who": "alice",
        "limit": 1,
        "used": 1,
    }
    assert FlowExecution.objects.filter(flow=flow).count() == 1


def test_a_flow_save_that_would_run_it_past_the_quota_is_refused_and_not_saved(alice, flow):
    api = api_client_for(alice)
    api.post("/api/flowconfigs/demo/f/run")
    body = {"flowGroup": "demo", "flowName": "once", "source": "a", "destinations": ["b"], "schedule": ""}
    body["properties"] = {"source.files.format": "csv"}
    refused = api.post("/api/flowconfigs", body, format="json")
    assert refused.status_code == 503, refused.content
    assert refused.json()["who"] == "alice"
    assert not FlowConfig.objects.filter(flow_name="once").exists()


def test_gobblins_run_immediately_action_gets_a_503_with_the_message(alice, flow):
    wire = Wire(alice)
    key = "/flowconfigsV2/($params:(),flowGroup:demo,flowName:f)?action=runImmediately"
    assert wire.send("POST", key, {}, "action").status_code == 200
    refused = wire.send("POST", key, {}, "action")
    assert refused.status_code == 503
    assert refused.json()["message"] == "Quota exceeded: alice at 1 of 1 executions started per hour."


def test_the_run_now_button_says_why_nothing_started(client, alice, flow):
    client.force_login(alice)
    client.post("/executions/demo/f/run/")
    page = client.post("/executions/demo/f/run/", follow=True).content.decode()
    assert "Not started: Quota exceeded: alice at 1 of 1 executions started per hour." in page
    assert FlowExecution.objects.filter(flow=flow).count() == 1
