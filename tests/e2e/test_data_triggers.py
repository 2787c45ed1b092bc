"""Alice makes one flow wait for another's dataset on the flow's triggers page, in a real browser:
a name that is not a flow is said beside the field; put right, the flow's page says what starts it
and the upstream's page what it feeds. She makes a webhook token, sees it once, and a script's POST
with it runs the flow; revoked, the same POST is refused."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from portal.orchestration.models import FlowExecution
from tests.e2e import ui

pytestmark = pytest.mark.django_db(transaction=True)


def _post(page, url: str, token: str) -> int:
    """A script's call (the browser's own cookies ride along: the token alone decides)."""
    return page.request.post(url, headers={"Authorization": f"Bearer {token}"}).status


def test_alice_chains_two_flows_and_runs_one_from_a_script(page, logged_in, lake, stack):
    alice = logged_in("alice")
    ui.make_flow(alice, "numbers")
    ui.make_flow(alice, "numbers-report")

    page.goto("/flows/e2e/numbers-report/")
    page.get_by_role("link", name="Edit triggers").click()
    expect(page).to_have_url(re.compile(r"/flows/e2e/numbers-report/triggers/$"))
    page.get_by_label("Upstream datasets").fill("e2e/no-such-flow")
    page.get_by_role("button", name="Save triggers").click()
    expect(page.locator("#id_upstream_errors")).to_contain_text("e2e/no-such-flow: no such flow.")

    page.get_by_label("Upstream datasets").fill("e2e/numbers")
    page.get_by_label("Freshness goal", exact=True).fill("within 2h")
    page.get_by_role("button", name="Save triggers").click()
    expect(page).to_have_url(re.compile(r"/flows/e2e/numbers-report/$"))
    expect(page.locator('[data-test="runs-when"]')).to_contain_text("e2e/numbers commits")
    expect(page.locator("#flow-triggers")).to_contain_text("committed within 2h")
    page.goto("/flows/e2e/numbers/")
    expect(page.locator('[data-test="feeds"]')).to_contain_text("e2e/numbers-report")

    page.goto("/flows/e2e/numbers-report/triggers/")
    page.get_by_role("button", name="Create a webhook token").click()
    token = page.locator('[data-test="webhook-token"]').inner_text().strip()
    assert token.startswith("fpw_")
    hook = f"{stack}/api/hooks/flows/e2e/numbers-report"
    assert _post(page, hook, token) == 202
    assert FlowExecution.objects.filter(flow_name="numbers-report", trigger="WEBHOOK").count() == 1
    page.get_by_role("link", name="Done").click()
    expect(page.locator("#webhook")).not_to_contain_text(token)
    page.get_by_role("button", name="Revoke the token").click()
    expect(page.locator("#webhook")).to_contain_text("No webhook token")
    assert _post(page, hook, token) == 404
