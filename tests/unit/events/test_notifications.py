"""Each user's notifications in the portal: a subscriber's alerts land on their
own list (whatever else they are sent to), newest first, paginated, with an
unread count in the menu; nobody sees another's. And "Email me" works in the
embedded mode: with no mail server set, mail is written under var/ and the
pages say so; a mail server that is down is a sentence, never an exception."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from django.test import override_settings
from django.utils import timezone

from portal.events import notifications, sinks
from portal.events.models import Event, Notification
from portal.events.services import raise_event
from portal.monitoring.models import Delivery, Subscription
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db

FILE_BACKEND = "django.core.mail.backends.filebased.EmailBackend"


@pytest.fixture
def flow(owner):
    return FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner, properties={})


def failed(flow, execution_id: int = 7) -> Event:
    return raise_event(
        "execution.failed",
        f"execution {execution_id} of {flow} failed",
        severity=Event.Severity.ERROR,
        flow_group=flow.flow_group,
        flow_name=flow.flow_name,
        execution_id=execution_id,
    )


def test_a_subscribers_alert_is_on_their_list_and_only_theirs(client, owner, outsider, flow):
    Subscription.objects.create(user=owner, flow=flow, by_email=False)  # neither email nor webhook
    failed(flow)
    assert sinks.deliver_pending_events() == 1

    client.force_login(owner)
    page = client.get("/notifications/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "execution 7 of sales/orders failed" in body and "/executions/sales/orders/7/" in body
    assert 'aria-label="1 unread"' in body  # the menu's count
    assert not Delivery.objects.exists()  # the portal's list is not a channel to report on

    client.force_login(outsider)
    theirs = client.get("/notifications/").content.decode()
    assert "sales/orders failed" not in theirs and "No notifications yet." in theirs
    assert client.post("/notifications/read/").status_code == 302
    assert Notification.objects.get().read_at is None  # marking reads only one's own


def test_reading_marks_them_read_and_the_count_goes(client, owner, flow):
    Subscription.objects.create(user=owner, flow=flow, by_email=False)
    for execution_id in (1, 2):
        failed(flow, execution_id)
    sinks.deliver_pending_events()
    client.force_login(owner)
    assert 'aria-label="2 unread"' in client.get("/flows/").content.decode()

    client.post("/notifications/read/")

    assert "unread" not in client.get("/notifications/").content.decode().split("<main", 1)[0]
    assert notifications.unread_count(owner) == 0


def test_the_list_is_newest_first_paginated_and_bounded(
    client, owner, flow, settings, django_assert_max_num_queries
):
    event = Event.objects.create(kind="execution.failed", message="m", flow_group="sales", flow_name="orders")
    for number in range(notifications.PAGE_SIZE + 3):
        notifications.notify(
            Event(pk=1000 + number, kind=event.kind, message=f"note {number}", created=event.created), owner
        )
    notifications.notify(
        Event(pk=1000, kind=event.kind, message="again", created=event.created), owner
    )  # once
    assert Notification.objects.filter(user=owner).count() == notifications.PAGE_SIZE + 3

    client.force_login(owner)
    with django_assert_max_num_queries(8):
        first = client.get("/notifications/").content.decode()
    newest = f"note {notifications.PAGE_SIZE + 2}"
    assert newest in first and "note 0<" not in first and "Page 1 of 2" in first
    assert "note 0<" in client.get("/notifications/?page=2").content.decode()
    assert notifications.unread_count(owner) == notifications.PAGE_SIZE + 3


def test_only_the_newest_are_kept(owner, monkeypatch):
    monkeypatch.setattr(notifications, "KEEP", 3)
    for number in range(5):
        notifications.notify(
            Event(pk=2000 + number, kind="execution.failed", message=str(number), created=timezone.now()),
            owner,
        )
    assert list(Notification.objects.filter(user=owner).values_list("message", flat=True)) == ["4", "3", "2"]


def test_email_in_the_embedded_mode_is_written_under_var_and_the_page_says_where(
    client, owner, flow, tmp_path
):
    mail_dir = tmp_path / "mail"
    with override_settings(EMAIL_BACKEND=FILE_BACKEND, EMAIL_FILE_PATH=str(mail_dir)):
        Subscription.objects.create(user=owner, flow=flow, by_email=True)
        failed(flow)
        assert sinks.deliver_pending_events() == 1
        (written,) = mail_dir.iterdir()
        assert owner.email in written.read_text() and "failed" in written.read_text()
        client.force_login(owner)
        card = client.get("/flows/sales/orders/").content.decode()
        form = client.get("/monitoring/flows/sales/orders/subscription/").content.decode()
    for page in (card, form):
        assert f"written to a file in {mail_dir}" in page
    assert "last delivered" in card


def test_the_embedded_default_writes_mail_to_var(settings):
    """No EMAIL_HOST: the settings choose the file backend under var/ (a subprocess reads them fresh)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMAIL_")}
    env.update(DJANGO_SETTINGS_MODULE="portal.settings", FLOWPORT_VAR_DIR=str(settings.VAR_DIR))
    code = "import django; django.setup(); from django.conf import settings as s; print(s.EMAIL_BACKEND, s.EMAIL_FILE_PATH)"
    shown = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert shown.stdout.split() == [FILE_BACKEND, str(settings.VAR_DIR / "mail")]


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (
            ConnectionRefusedError(111, "Connection refused"),
            "refused the connection: no mail server is running",
        ),
        (TimeoutError("timed out"), "did not answer within"),
        (socket.gaierror(-2, "Name or service not known"), "its name does not resolve"),
        (RuntimeError("boom"), "an unexpected error; the portal's log has the details"),
    ],
)
def test_a_failed_delivery_is_said_in_words(failure, said):
    assert said in sinks.describe_failure(failure)
    assert type(failure).__name__ not in sinks.describe_failure(failure)
