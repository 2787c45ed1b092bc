"""Subscriptions: a user subscribes to a flow on its page, sees and removes
it on the profile, and hears about failures, SLA misses and recoveries by
email (Django's locmem backend here; a real SMTP server in
test_subscription_smtp.py) and by webhook (a real HTTP server on loopback),
through the same delivery pass as the operator's sinks."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core import mail
from django.db import transaction

from portal.events import sinks
from portal.events.models import Event
from portal.events.services import raise_event
from portal.monitoring.models import Subscription
from portal.orchestration.orchestrator import reevaluate_execution
from tests.conftest import api_client_for
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.monitoring.conftest import make_execution

pytestmark = pytest.mark.django_db


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers["Content-Length"])
        self.server.received.append((self.path, json.loads(self.rfile.read(length))))
        self.send_response(self.server.answer)
        if self.server.answer in (301, 302, 307):
            self.send_header("Location", "http://elsewhere.invalid/")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    server.received, server.answer = [], 204
    server.url = f"http://127.0.0.1:{server.server_port}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def reader(db):
    return UserFactory(username="rita")


def _event(kind: str, flow, severity: str = Event.Severity.ERROR) -> Event:
    return raise_event(
        kind,
        f"{flow}: {kind}",
        severity=severity,
        flow_group=flow.flow_group,
        flow_name=flow.flow_name,
        execution_id=7,
    )


# --- on the pages -------------------------------------------------------------------


def test_a_reader_subscribes_on_the_flow_page_and_removes_it_on_the_profile(client, reader, flow):
    client.force_login(reader)
    page = client.get(f"/flows/{flow.flow_group}/{flow.flow_name}/").content.decode()
    assert "Your subscription" in page and "/monitoring/flows/sales/orders/subscription/" in page

    response = client.post(
        "/monitoring/flows/sales/orders/subscription/",
        {"on_failure": "on", "on_recovery": "on", "by_email": "on", "webhook_url": ""},
    )
    assert response.status_code == 302 and response["Location"] == "/flows/sales/orders/"
    subscription = Subscription.objects.get(user=reader, flow=flow)
    assert (subscription.on_failure, subscription.on_sla_miss, subscription.on_recovery) == (
        True,
        False,
        True,
    )
    page = client.get("/flows/sales/orders/").content.decode()
    assert "Subscribed to sales/orders: failure, recovery by email." in page
    assert "You hear about <strong>failure, recovery by email</strong>" in page

    profile = client.get("/account/").content.decode()
    assert 'id="subscription-table"' in profile and "sales / orders" in profile
    response = client.post(f"/monitoring/subscriptions/{subscription.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == "/account/"
    assert not Subscription.objects.exists()
    assert "No subscriptions yet." in client.get("/account/").content.decode()


def test_a_webhook_url_is_not_shown_again_and_kept_when_sent_back_masked(client, reader, flow):
    client.force_login(reader)
    url = "/monitoring/flows/sales/orders/subscription/"
    secret_hook = "https://hooks.example.org/services/T000/B000/sEcReTtOkEn"
    client.post(url, {"on_failure": "on", "webhook_url": secret_hook})
    for page in (url, "/flows/sales/orders/", "/account/"):
        html = client.get(page).content.decode()
        assert "sEcReTtOkEn" not in html and "https://hooks.example.org/…" in html, page
    form = client.get(url).context["form"]
    client.post(url, {"on_failure": "on", "on_recovery": "on", "webhook_url": form["webhook_url"].value()})
    subscription = Subscription.objects.get()
    assert subscription.webhook_url == secret_hook and subscription.on_recovery


def test_changing_a_subscription_keeps_one_row(client, reader, flow, receiver):
    client.force_login(reader)
    url = "/monitoring/flows/sales/orders/subscription/"
    client.post(url, {"on_failure": "on", "by_email": "on"})
    response = client.post(url, {"on_sla_miss": "on", "webhook_url": receiver.url})
    assert response.status_code == 302
    subscription = Subscription.objects.get()
    assert (subscription.on_failure, subscription.on_sla_miss, subscription.by_email) == (False, True, False)
    assert subscription.webhook_url == receiver.url


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        (
            {"on_failure": "on", "webhook_url": "ftp://hooks.example.org/x"},
            "webhook_url",
            "http:// or https://",
        ),
        ({"on_failure": "on", "webhook_url": "file:///etc/passwd"}, "webhook_url", "http:// or https://"),
        ({"on_failure": "on", "webhook_url": "https://u:p@hooks.example.org/"}, "webhook_url", "no user"),
        ({"on_failure": "on"}, "by_email", "Choose email, a webhook URL, or both."),
        ({"by_email": "on"}, "on_failure", "Choose at least one of failure, SLA miss or recovery."),
    ],
)
def test_a_bad_subscription_says_which_field_and_why(client, reader, flow, data, field, message):
    client.force_login(reader)
    response = client.post("/monitoring/flows/sales/orders/subscription/", data)
    assert response.status_code == 400
    form = response.context["form"]
    assert any(message in error for error in form.errors[field])
    assert not Subscription.objects.exists()


def test_the_operator_may_restrict_webhook_hosts(client, reader, flow, settings):
    settings.MONITORING_WEBHOOK_ALLOWED_HOSTS = [".example.org", "hooks.internal"]
    client.force_login(reader)
    url = "/monitoring/flows/sales/orders/subscription/"
    response = client.post(url, {"on_failure": "on", "webhook_url": "http://169.254.169.254/latest"})
    assert response.status_code == 400
    assert "may not go to 169.254.169.254" in response.context["form"].errors["webhook_url"][0]
    for allowed in ("https://hooks.example.org/x", "https://example.org/y", "http://hooks.internal/z"):
        assert client.post(url, {"on_failure": "on", "webhook_url": allowed}).status_code == 302
    assert client.post(url, {"on_failure": "on", "webhook_url": "https://badexample.org/"}).status_code == 400


def test_an_account_without_email_cannot_subscribe_by_email(client, flow):
    nomail = UserFactory(username="nomail", email="")
    client.force_login(nomail)
    response = client.post(
        "/monitoring/flows/sales/orders/subscription/", {"on_failure": "on", "by_email": "on"}
    )
    assert response.status_code == 400
    assert "no email address" in response.context["form"].errors["by_email"][0]


def test_no_subscription_to_a_flow_one_cannot_read_or_that_does_not_exist(client, reader):
    client.force_login(reader)
    assert client.get("/monitoring/flows/sales/nope/subscription/").status_code == 404
    client.logout()
    response = client.get("/monitoring/flows/sales/nope/subscription/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_nobody_removes_someone_elses_subscription(client, reader, outsider, flow):
    theirs = Subscription.objects.create(user=reader, flow=flow)
    client.force_login(outsider)
    assert client.post(f"/monitoring/subscriptions/{theirs.pk}/delete/").status_code == 404
    assert Subscription.objects.filter(pk=theirs.pk).exists()


def test_unsubscribing_goes_back_only_to_a_local_page(client, reader, flow):
    client.force_login(reader)
    one = Subscription.objects.create(user=reader, flow=flow)
    response = client.post(f"/monitoring/subscriptions/{one.pk}/delete/", {"next": "https://evil.example/"})
    assert response["Location"] == "/account/"


# --- delivery -------------------------------------------------------------------------


def test_a_subscriber_hears_of_the_kinds_chosen_once_by_email_and_webhook(reader, flow, receiver, settings):
    settings.SITE_URL = "https://flowport.example.org"
    Subscription.objects.create(
        user=reader, flow=flow, on_failure=True, on_sla_miss=False, by_email=True, webhook_url=receiver.url
    )
    failed = _event("execution.failed", flow)
    _event("sla.flow_finish_missed", flow)  # not chosen
    assert sinks.deliver_pending_events() == 2
    assert sinks.deliver_pending_events() == 0
    assert [message.to for message in mail.outbox] == [["rita@example.org"]]
    assert mail.outbox[0].subject == "[Flowport] ERROR execution.failed: sales/orders"
    assert "https://flowport.example.org/account/" in mail.outbox[0].body
    assert len(receiver.received) == 1
    path, body = receiver.received[0]
    assert path == "/hook" and body["kind"] == "execution.failed" and body["flowName"] == "orders"
    failed.refresh_from_db()
    sub = Subscription.objects.get().pk
    assert sorted(failed.delivered_to) == [f"sub{sub}:email", f"sub{sub}:webhook"]


def test_only_the_flows_own_subscribers_and_the_operators_sinks_hear(reader, outsider, flow, settings):
    settings.MONITORING_EMAIL_TO = ["oncall@example.org"]
    other_flow = FlowConfigFactory(flow_group="sales", flow_name="refunds", owner=outsider, properties={})
    Subscription.objects.create(user=reader, flow=flow)
    Subscription.objects.create(user=outsider, flow=other_flow)
    _event("sla.job_start_missed", flow)
    assert sinks.deliver_pending_events() == 1
    assert sorted(tuple(message.to) for message in mail.outbox) == [
        ("oncall@example.org",),
        ("rita@example.org",),
    ]


def test_an_inactive_subscriber_hears_nothing(reader, flow):
    Subscription.objects.create(user=reader, flow=flow)
    reader.is_active = False
    reader.save()
    event = _event("execution.failed", flow)
    assert sinks.deliver_pending_events() == 1  # nothing to send: done
    assert mail.outbox == []
    event.refresh_from_db()
    assert event.delivered_to == []


def test_a_failing_subscriber_webhook_is_retried_without_repeating_the_email(reader, flow, receiver):
    receiver.answer = 500
    Subscription.objects.create(user=reader, flow=flow, webhook_url=receiver.url)
    event = _event("execution.failed", flow)
    assert sinks.deliver_pending_events() == 0
    event.refresh_from_db()
    assert event.delivered_at is None and "webhook: HTTPError" in event.delivery_error
    assert len(mail.outbox) == 1


def test_a_webhook_redirect_is_not_followed(reader, flow, receiver):
    receiver.answer = 302
    Subscription.objects.create(user=reader, flow=flow, by_email=False, webhook_url=receiver.url)
    event = _event("execution.failed", flow)
    assert sinks.deliver_pending_events() == 0
    event.refresh_from_db()
    assert "redirect to http://elsewhere.invalid/ not followed" in event.delivery_error


def test_a_webhook_host_disallowed_since_subscribing_is_not_called(reader, flow, receiver, settings):
    Subscription.objects.create(user=reader, flow=flow, by_email=False, webhook_url=receiver.url)
    settings.MONITORING_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.org"]
    event = _event("execution.failed", flow)
    assert sinks.deliver_pending_events() == 0
    event.refresh_from_db()
    assert "may not go to 127.0.0.1" in event.delivery_error and receiver.received == []


def test_recovery_is_the_first_commit_after_a_failure(reader, flow):
    Subscription.objects.create(user=reader, flow=flow, on_failure=False, on_sla_miss=False, on_recovery=True)
    make_execution(flow, status="FAILED")

    def commit_one():
        execution = make_execution(flow, status="RUNNING", jobs=[{"status": "COMMITTED"}])
        with transaction.atomic():
            reevaluate_execution(execution)
        execution.refresh_from_db()
        assert execution.status == "COMMITTED"
        return execution

    recovered = commit_one()
    commit_one()  # a second success in a row is no recovery
    events = list(Event.objects.filter(kind="execution.recovered"))
    assert [event.execution_id for event in events] == [recovered.execution_id]
    assert events[0].severity == "INFO"
    assert sinks.deliver_pending_events() == 1
    assert [message.subject for message in mail.outbox] == [
        "[Flowport] INFO execution.recovered: sales/orders"
    ]


def test_a_deleted_flow_takes_its_subscriptions_with_it(reader, flow):
    Subscription.objects.create(user=reader, flow=flow)
    flow.delete()
    assert not Subscription.objects.exists()


# --- the API ----------------------------------------------------------------------------


def test_the_api_lists_creates_changes_and_removes_only_ones_own(reader, outsider, flow, receiver):
    api = api_client_for(reader)
    response = api.post(
        "/api/subscriptions",
        {"flowGroup": "sales", "flowName": "orders", "onRecovery": True, "webhookUrl": receiver.url},
        format="json",
    )
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["onFailure"] and created["onSlaMiss"] and created["onRecovery"] and created["email"]
    assert created["webhookUrl"] == f"http://127.0.0.1:{receiver.server_port}/…"  # the path may be a token
    again = api.post("/api/subscriptions", {"flowGroup": "sales", "flowName": "orders"}, format="json")
    assert again.status_code == 409

    response = api.patch(
        f"/api/subscriptions/{created['id']}",
        {"email": False, "webhookUrl": created["webhookUrl"]},
        format="json",
    )
    assert response.status_code == 200 and response.json()["email"] is False
    assert Subscription.objects.get().webhook_url == receiver.url  # sent back masked: kept
    bad = api.patch(f"/api/subscriptions/{created['id']}", {"webhookUrl": "gopher://x/"}, format="json")
    assert bad.status_code == 400 and "http:// or https://" in bad.json()["webhookUrl"][0]

    theirs = api_client_for(outsider)
    listed = theirs.get("/api/subscriptions").json()
    assert (listed["results"] if isinstance(listed, dict) else listed) == []
    assert theirs.get(f"/api/subscriptions/{created['id']}").status_code == 404
    assert theirs.delete(f"/api/subscriptions/{created['id']}").status_code == 404

    assert api.delete(f"/api/subscriptions/{created['id']}").status_code == 204
    assert not Subscription.objects.exists()


def test_the_api_refuses_an_unknown_flow_and_an_empty_subscription(reader, flow):
    api = api_client_for(reader)
    response = api.post("/api/subscriptions", {"flowGroup": "sales", "flowName": "nope"}, format="json")
    assert response.status_code == 400 and "flowName" in response.json()
    response = api.post(
        "/api/subscriptions",
        {"flowGroup": "sales", "flowName": "orders", "onFailure": False, "onSlaMiss": False},
        format="json",
    )
    assert response.status_code == 400 and "onFailure" in response.json()
    assert api_client_for(reader).get("/api/subscriptions").status_code == 200
    assert not Subscription.objects.exists()
