"""Event sinks: a real HTTP server on loopback for the webhook, Django's
locmem backend for email. A failing sink is logged and retried, never
raised, and an accepted delivery is never repeated."""

from __future__ import annotations

import json
import socket
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core import mail
from django.utils import timezone

from portal.events import sinks
from portal.events.models import Event
from portal.events.services import raise_event

pytestmark = pytest.mark.django_db


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers["Content-Length"])
        self.server.received.append((self.headers["Content-Type"], json.loads(self.rfile.read(length))))
        self.send_response(self.server.answer)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def webhook(settings):
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    server.received, server.answer = [], 204
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.MONITORING_WEBHOOK_URL = f"http://127.0.0.1:{server.server_port}/hooks/flowport"
    yield server
    server.shutdown()
    server.server_close()


def _sla_event() -> Event:
    return raise_event(
        "sla.flow_finish_missed",
        "sales/orders#42: did not finish within its SLA",
        severity=Event.Severity.ERROR,
        flow_group="sales",
        flow_name="orders",
        execution_id=42,
    )


def test_the_webhook_receives_each_event_once_as_json(webhook, settings):
    settings.SITE_URL = "https://flowport.example.org"
    event = _sla_event()
    assert sinks.deliver_pending_events() == 1
    assert sinks.deliver_pending_events() == 0
    assert len(webhook.received) == 1
    content_type, body = webhook.received[0]
    assert content_type == "application/json"
    assert body["kind"] == "sla.flow_finish_missed" and body["severity"] == "ERROR"
    assert (body["flowGroup"], body["flowName"], body["executionId"]) == ("sales", "orders", 42)
    assert body["url"] == "https://flowport.example.org/executions/sales/orders/42/"
    event.refresh_from_db()
    assert event.delivered_at is not None and event.delivered_to == ["webhook"]


def test_email_goes_to_the_configured_people(settings):
    settings.MONITORING_EMAIL_TO = ["oncall@example.org", "team@example.org"]
    _sla_event()
    assert sinks.deliver_pending_events() == 1
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["oncall@example.org", "team@example.org"]
    assert message.subject == "[Flowport] ERROR sla.flow_finish_missed: sales/orders"
    assert "did not finish within its SLA" in message.body
    assert "/executions/sales/orders/42/" in message.body


def test_a_failing_webhook_is_logged_retried_later_and_never_raised(webhook, settings, caplog):
    settings.MONITORING_EMAIL_TO = ["oncall@example.org"]
    webhook.answer = 500
    event = _sla_event()
    assert sinks.deliver_pending_events() == 0
    event.refresh_from_db()
    assert event.delivered_at is None and event.delivered_to == ["email"]
    assert "webhook: HTTP Error 500" in event.delivery_error
    assert "not delivered to webhook" in caplog.text
    assert sinks.deliver_pending_events() == 0  # backing off: not yet
    # After the backoff the webhook works again; the email is not sent twice.
    webhook.answer = 200
    later = timezone.now() + timedelta(minutes=5)
    assert sinks.deliver_pending_events(now=later) == 1
    assert len(mail.outbox) == 1 and len(webhook.received) == 2
    event.refresh_from_db()
    assert event.delivered_at is not None and sorted(event.delivered_to) == ["email", "webhook"]


def test_an_unreachable_webhook_times_out_without_raising(settings):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.MONITORING_WEBHOOK_URL = f"http://127.0.0.1:{port}/"
    settings.MONITORING_SINK_TIMEOUT_SECONDS = 1
    event = _sla_event()
    assert sinks.deliver_pending_events() == 0
    event.refresh_from_db()
    assert event.delivery_attempts == 1 and "refused" in event.delivery_error.lower()


def test_severity_floor_age_limit_and_no_sinks(settings):
    raise_event("executor.recovered", "back", severity=Event.Severity.INFO)
    assert sinks.deliver_pending_events() == 0  # no sinks configured: nothing is claimed
    assert Event.objects.get().delivery_attempts == 0
    settings.MONITORING_EMAIL_TO = ["oncall@example.org"]
    settings.MONITORING_SINK_MIN_SEVERITY = "WARNING"
    old = _sla_event()
    Event.objects.filter(pk=old.pk).update(created=timezone.now() - timedelta(days=2))
    assert sinks.deliver_pending_events() == 0  # INFO below the floor, the other too old
    assert mail.outbox == []


def test_raising_an_event_wakes_the_sinks_only_after_commit(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        _sla_event()
    assert len(callbacks) == 1


def test_a_dedupe_key_raises_once_without_spoiling_the_callers_transaction():
    assert raise_event("sla.flow_finish_at_risk", "first", dedupe_key="k:1") is not None
    assert raise_event("sla.flow_finish_at_risk", "again", dedupe_key="k:1") is None
    assert Event.objects.filter(dedupe_key="k:1").count() == 1
    assert Event.objects.count() == 1  # and the transaction is still usable
