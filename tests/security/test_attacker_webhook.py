"""Mallory and a flow's webhook: `POST /api/hooks/flows/{group}/{name}` runs victor's flow only
for the bearer of its current token. A wrong token, her own flow's token, victor's revoked (or
replaced) token, a token sent anywhere but the Authorization header, and her session all get the
same 404 a flow that does not exist gets, and run nothing. The token is nowhere in plaintext."""

from __future__ import annotations

import logging

import pytest
from rest_framework.test import APIClient

from portal.flows.triggers.models import FlowTrigger
from portal.orchestration.models import FlowExecution
from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory, UserFactory

pytestmark = pytest.mark.django_db

HOOK = "/api/hooks/flows/team-v/orders"


@pytest.fixture
def people(db):
    victor, mallory = UserFactory(username="victor"), UserFactory(username="mallory")
    FlowConfigFactory(owner=victor, flow_group="team-v", flow_name="orders", schedule="")
    FlowConfigFactory(owner=mallory, flow_group="mal", flow_name="grab", schedule="")
    return victor, mallory


def token_of(user, flow: str) -> str:
    response = api_client_for(user).post(f"/api/flowconfigs/{flow}/webhook-token")
    assert response.status_code == 201
    return response.json()["token"]


def call(token: str | None, url: str = HOOK, **extra):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token is not None else {}
    return APIClient().post(url, **headers, **extra)


def no_runs() -> bool:
    return not FlowExecution.objects.filter(trigger=FlowExecution.Trigger.WEBHOOK).exists()


def test_mallory_cannot_run_victors_flow_without_its_current_token(people, caplog):
    victor, mallory = people
    victors = token_of(victor, "team-v/orders")
    hers = token_of(mallory, "mal/grab")
    unknown = call(victors, "/api/hooks/flows/team-v/nothing-here")
    assert unknown.status_code == 404
    for attempt in (
        call(None),
        call(""),
        call("fpw_" + "A" * 43),  # a guessed token
        call(hers),  # her own flow's token
        call(victors[:-1] + ("A" if victors[-1] != "A" else "B")),  # one character off
        APIClient().post(HOOK, {"token": victors}),  # not in the header
        APIClient().post(f"{HOOK}?token={victors}"),
    ):
        assert attempt.status_code == 404 and attempt.json() == unknown.json()
    session = api_client_for(mallory)  # signed in: her session is no token
    assert session.post(HOOK).status_code == 404
    assert no_runs()


def test_a_revoked_or_replaced_token_is_refused_on_replay(people):
    victor, _mallory = people
    old = token_of(victor, "team-v/orders")
    assert call(old).status_code == 202
    new = token_of(victor, "team-v/orders")  # replacing it revokes the old one
    assert call(old).status_code == 404
    assert call(new).status_code == 202
    assert api_client_for(victor).delete("/api/flowconfigs/team-v/orders/webhook-token").status_code == 204
    assert call(new).status_code == 404
    assert FlowExecution.objects.filter(trigger=FlowExecution.Trigger.WEBHOOK).count() == 2


def test_mallory_cannot_make_or_revoke_victors_token(people):
    victor, mallory = people
    token = token_of(victor, "team-v/orders")
    hers = api_client_for(mallory)
    assert hers.post("/api/flowconfigs/team-v/orders/webhook-token").status_code == 403
    assert hers.delete("/api/flowconfigs/team-v/orders/webhook-token").status_code == 403
    assert call(token).status_code == 202  # still victor's, unchanged


def test_the_token_is_nowhere_in_plaintext(people, caplog, client):
    victor, _mallory = people
    with caplog.at_level(logging.DEBUG):
        token = token_of(victor, "team-v/orders")
        call(token)
        call("fpw_wrong")
    trigger = FlowTrigger.objects.get(flow__flow_name="orders")
    stored = " ".join(str(v) for v in FlowTrigger.objects.filter(pk=trigger.pk).values().get().values())
    assert token not in stored and token not in caplog.text
    assert token not in str(api_client_for(victor).get("/api/flowconfigs/team-v/orders/triggers").json())
    client.force_login(victor)
    assert token not in client.get("/flows/team-v/orders/triggers/").content.decode()
    assert token not in client.get("/flows/team-v/orders/").content.decode()
