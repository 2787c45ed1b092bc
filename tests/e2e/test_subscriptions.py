"""A user subscribes to a flow on its page (Airflow's email-on-failure,
per user), hears of its failure at a webhook of theirs — sent by the real
scheduler's event sinks, with a link to this portal's own address — follows
the link, re-runs the failed job, hears of the recovery (the same execution
turned COMMITTED), sees the last delivery on the flow page and unsubscribes
on the profile page."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from playwright.sync_api import expect

from portal.monitoring.models import Subscription
from portal.orchestration.models import FlowExecution
from tests.e2e import ui
from tests.integration.stack import wait_until
from tests.ports import free_port

pytestmark = pytest.mark.django_db(transaction=True)


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers["Content-Length"])
        self.server.received.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def hook():
    server = HTTPServer(("127.0.0.1", free_port()), _Hook)
    server.received = []
    server.url = f"http://127.0.0.1:{server.server_port}/flowport"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _run_now(page) -> FlowExecution:
    before = set(FlowExecution.objects.values_list("pk", flat=True))
    page.goto("/flows/e2e/flaky/")
    page.locator("#flow-executions").get_by_role("button", name="Run now").click()
    expect(page).to_have_url(re.compile(r"/executions/e2e/flaky/\d+/$"))
    return ui.finished(FlowExecution.objects.exclude(pk__in=before).get(), timeout=300)


def _heard(hook, kind: str) -> dict:
    wait_until(lambda: any(body["kind"] == kind for body in hook.received), 60, f"the webhook to hear {kind}")
    return next(body for body in hook.received if body["kind"] == kind)


def test_a_user_subscribes_hears_of_failure_re_runs_the_job_hears_of_recovery_and_unsubscribes(
    page, logged_in, lake, hook, stack
):
    alice = logged_in("alice")
    # The first attempt fails (and leaves the marker), the next run succeeds.
    ui.make_flow(alice, "flaky", **{"flaky.marker.file": str(lake / "flaky.marker")})

    page.goto("/flows/e2e/flaky/")
    card = page.locator("#subscription")
    expect(card).to_contain_text("always in your notifications, and by email or a webhook call")
    card.get_by_role("link", name="Subscribe").click()
    page.get_by_label("Recovery").check()
    page.get_by_label("Email me").uncheck()
    page.get_by_label("Webhook URL").fill("ftp://hooks.example.org/")
    page.get_by_role("button", name="Subscribe").click()
    expect(page.locator("#id_webhook_url_error")).to_contain_text("http:// or https://")
    ui.screenshot(page, "subscription-invalid-webhook")
    page.get_by_label("Webhook URL").fill(hook.url)
    page.get_by_role("button", name="Subscribe").click()
    expect(page).to_have_url(re.compile(r"/flows/e2e/flaky/$"))
    expect(page.locator(".messages")).to_contain_text("Subscribed to e2e/flaky")
    expect(page.locator("#subscription-summary")).to_contain_text("failure, SLA miss, recovery by webhook")
    ui.screenshot(page, "flow-subscribed")

    failed = _run_now(page)
    assert failed.status == "FAILED", failed.message
    body = _heard(hook, "execution.failed")
    assert (body["flowGroup"], body["flowName"], body["executionId"]) == ("e2e", "flaky", failed.execution_id)
    # The link goes to this portal's host and port (SITE_URL follows the bound address).
    link = f"{stack}/executions/e2e/flaky/{failed.execution_id}/"
    assert body["url"] == link

    # The failure is on her notifications too: the menu counts it, the page links the execution.
    page.goto("/flows/")
    menu_link = page.get_by_role("navigation", name="Main").get_by_role(
        "link", name=re.compile("Notifications")
    )
    expect(menu_link).to_contain_text("1")
    menu_link.click()
    row = page.locator("#notification-table tbody tr").first
    expect(row).to_contain_text("execution.failed")
    expect(row.get_by_role("link", name=f"execution {failed.execution_id}")).to_have_attribute(
        "href", f"/executions/e2e/flaky/{failed.execution_id}/"
    )
    ui.screenshot(page, "notifications")
    page.get_by_role("button", name="Mark all as read").click()
    expect(page.locator(".messages")).to_contain_text("Marked 1 notification as read.")
    expect(page.locator(".badge.count")).to_have_count(0)

    # She follows the webhook's link and re-runs the failed job: the same execution, no new one.
    page.goto(body["url"])
    page.get_by_role("button", name=re.compile("Re-run this job")).click()
    expect(page.locator(".messages")).to_contain_text("Re-run of")

    def committed() -> bool:
        failed.refresh_from_db()
        return failed.status == "COMMITTED"

    wait_until(committed, 300, f"execution {failed.execution_id} to commit after the re-run")
    body = _heard(hook, "execution.recovered")
    assert body["executionId"] == failed.execution_id and body["severity"] == "INFO"
    assert body["url"] == link
    assert [b["kind"] for b in hook.received] == ["execution.failed", "execution.recovered"]
    assert FlowExecution.objects.filter(flow_name="flaky").count() == 1

    page.goto("/flows/e2e/flaky/")
    report = page.locator("#subscription .delivery-report")
    expect(report).to_contain_text("Webhook: last delivered")
    expect(report).to_contain_text("(execution.recovered)")
    ui.screenshot(page, "flow-subscription-delivered")

    # On her phone the same report reads whole, the page no wider than the screen.
    page.set_viewport_size({"width": 375, "height": 812})
    page.goto("/flows/e2e/flaky/")
    expect(page.locator("#subscription .delivery-report")).to_contain_text("Webhook: last delivered")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    ui.screenshot(page, "flow-subscription-delivered-375")

    page.goto("/account/")
    row = page.locator("#subscription-table tbody tr", has_text="e2e / flaky")
    expect(row).to_contain_text("failure, SLA miss, recovery by webhook")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    ui.screenshot(page, "profile-subscriptions")
    row.get_by_role("button", name="Remove subscription to e2e/flaky").click()
    expect(page.locator(".messages")).to_contain_text("Unsubscribed from e2e/flaky")
    expect(page.locator("#subscription-table")).to_contain_text("No subscriptions yet.")
    assert not Subscription.objects.exists()
