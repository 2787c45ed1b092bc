"""A subscriber's email really leaves through SMTP: Django's SMTP backend
talks to a real SMTP server (aiosmtpd) on loopback."""

from __future__ import annotations

import pytest
from aiosmtpd.controller import Controller

from portal.events import sinks
from portal.events.services import raise_event
from portal.monitoring.models import Subscription
from tests.factories import UserFactory
from tests.ports import free_port

pytestmark = pytest.mark.django_db


class _Inbox:
    def __init__(self):
        self.received = []

    async def handle_DATA(self, server, session, envelope):
        self.received.append((envelope.mail_from, envelope.rcpt_tos, envelope.content.decode()))
        return "250 OK"


@pytest.fixture
def smtp(settings):
    inbox = _Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.MONITORING_EMAIL_FROM = "flowport@example.org"
    yield inbox
    controller.stop()


def test_a_subscriber_gets_the_failure_by_smtp(smtp, flow):
    reader = UserFactory(username="rita")
    Subscription.objects.create(user=reader, flow=flow, on_failure=True)
    event = raise_event(
        "execution.failed",
        "sales/orders#9 failed: Job x failed: connection refused",
        severity="ERROR",
        flow_group="sales",
        flow_name="orders",
        execution_id=9,
    )
    assert sinks.deliver_pending_events() == 1
    assert len(smtp.received) == 1
    sender, recipients, content = smtp.received[0]
    assert sender == "flowport@example.org" and recipients == ["rita@example.org"]
    assert "Subject: [Flowport] ERROR execution.failed: sales/orders" in content
    assert "connection refused" in content
    event.refresh_from_db()
    sub = Subscription.objects.get().pk
    assert sorted(event.delivered_to) == [f"sub{sub}:email", f"sub{sub}:portal"]
