"""Subscriptions: a user subscribes to a flow on its page, sees and removes
it on the profile, and hears about failures, SLA misses and recoveries by
email (Django's locmem backend here; a real SMTP server in
test_subscription_smtp.py) and by webhook (a real HTTP server on loopback),
through the same delivery pass as the operator's sinks."""

from __future__ import annotations

import json
import socket
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core import mail
from django.db import connection, transaction
from django.utils import timezone

from portal.events import sinks
from portal.events.models import Event
from portal.events.services import raise_event
from portal.monitoring.models import Delivery, Subscription
from portal.monitoring.subscriptions import describe
from portal.orchestration.control.actions import process_actions
from portal.orchestration.control.orchestrator import reevaluate_execution
from portal.orchestration.models import JobExecution
from portal.settings import site_url_from_bind
from tests.builders.api import api_client_for
from tests.builders.executions import make_execution
from tests.factories import FlowConfigFactory, UserFactory

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
def receiver(settings):
    # The receiver listens on loopback, which users' webhooks reach only when the operator
    # allows it (MONITORING_WEBHOOK_INTERNAL_HOSTS; tests/security/test_attacker_outbound.py
    # shows the refusal without it).
    settings.MONITORING_WEBHOOK_INTERNAL_HOSTS = ["127.0.0.1"]
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


def test_the_database_holds_the_webhook_url_sealed_and_the_sender_reads_it_whole(reader, flow, receiver):
    """Its path is a chat tool's token: the column, a backup or anyone with SQL sees SEALED:…, the
    delivery posts to the URL as typed."""
    token_url = receiver.url + "/T000/B000/sEcReTtOkEn"
    subscription = Subscription.objects.create(
        user=reader, flow=flow, on_failure=True, by_email=False, webhook_url=token_url
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT webhook_url FROM monitoring_subscription WHERE id = %s", [subscription.pk])
        (stored,) = cursor.fetchone()
    assert stored.startswith("SEALED:") and "sEcReTtOkEn" not in stored and "127.0.0.1" not in stored
    assert Subscription.objects.get(pk=subscription.pk).webhook_url == token_url
    assert Subscription.objects.exclude(webhook_url="").count() == 1

    _event("execution.failed", flow)
    assert sinks.deliver_pending_events() == 1
    assert [path for path, _body in receiver.received] == ["/hook/T000/B000/sEcReTtOkEn"]


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
        ({"by_email": "on"}, "on_failure", "Choose at least one of failure, SLA miss, recovery or success."),
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
    assert sorted(failed.delivered_to) == [f"sub{sub}:email", f"sub{sub}:portal", f"sub{sub}:webhook"]


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
    assert event.delivered_at is None and "webhook: HTTP Error 500" in event.delivery_error
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


def test_a_chat_webhook_gets_one_text_message_that_chat_tools_accept(reader, flow, receiver, settings):
    settings.SITE_URL = "https://flowport.example.org"
    Subscription.objects.create(
        user=reader, flow=flow, by_email=False, webhook_url=receiver.url, webhook_format="chat"
    )
    _event("execution.failed", flow)
    assert sinks.deliver_pending_events() == 1
    ((_path, body),) = receiver.received
    # Slack, Mattermost and Teams incoming webhooks take {"text": ...}; nothing else is needed.
    assert list(body) == ["text"]
    lines = body["text"].splitlines()
    assert lines[0] == "Flowport ERROR execution.failed: sales/orders"
    assert "sales/orders: execution.failed" in lines[1]
    assert lines[-1] == "https://flowport.example.org/executions/sales/orders/7/"
    assert "by chat webhook" in describe_of(reader)


def describe_of(user) -> str:
    return describe(Subscription.objects.get(user=user))


def test_every_attempt_shows_on_the_subscription_and_retries_back_off(client, reader, flow, receiver):
    receiver.answer = 500
    Subscription.objects.create(user=reader, flow=flow, by_email=True, webhook_url=receiver.url)
    event = _event("execution.failed", flow)
    later = timezone.now()
    waits = []
    for _attempt in range(4):  # every try fails: 30 s, 1 min, 2 min apart, then it gives up
        assert sinks.deliver_pending_events(now=later) == 0
        newest = Delivery.objects.filter(channel="webhook").first()
        if newest.retry_at:
            waits.append(round((newest.retry_at - newest.created).total_seconds()))
            later = newest.retry_at + timedelta(seconds=1)
    assert waits == [30, 60, 120]
    attempts = list(
        Delivery.objects.filter(channel="webhook").order_by("id").values_list("attempt", "status")
    )
    assert attempts == [(1, "RETRYING"), (2, "RETRYING"), (3, "RETRYING"), (4, "FAILED")]
    assert list(Delivery.objects.filter(channel="email").values_list("status", flat=True)) == ["DELIVERED"]
    assert len(mail.outbox) == 1 and len(receiver.received) == 4
    assert sinks.deliver_pending_events(now=later + timedelta(minutes=10)) == 0  # no fifth try
    event.refresh_from_db()
    assert event.delivery_attempts == 4 and event.delivered_at is None

    client.force_login(reader)
    card = client.get("/flows/sales/orders/").content.decode()
    assert "Email:</strong>\n    last delivered" in card
    assert "Webhook:</strong>\n    nothing delivered yet" in card
    assert "HTTP Error 500: Internal Server Error" in card and "gave up after attempt 4" in card
    profile = client.get("/account/").content.decode()
    assert "gave up after attempt 4" in profile and "/hook" not in profile  # the path may be a token


def test_a_webhook_that_comes_back_shows_as_delivered(client, reader, flow, receiver):
    receiver.answer = 503
    Subscription.objects.create(user=reader, flow=flow, by_email=False, webhook_url=receiver.url)
    _event("execution.failed", flow)
    assert sinks.deliver_pending_events() == 0
    client.force_login(reader)
    card = client.get("/flows/sales/orders/").content.decode()
    assert "HTTP Error 503" in card and "attempt 1, trying again at" in card
    receiver.answer = 204
    assert sinks.deliver_pending_events(now=timezone.now() + timedelta(minutes=1)) == 1
    card = client.get("/flows/sales/orders/").content.decode()
    assert "last delivered" in card and "(execution.failed)" in card and "HTTP Error 503" not in card
    api = api_client_for(reader).get("/api/subscriptions").json()
    (row,) = api["results"] if isinstance(api, dict) else api
    (webhook,) = row["deliveries"]
    assert webhook["channel"] == "webhook" and webhook["lastDeliveredKind"] == "execution.failed"
    assert webhook["lastDelivered"] and webhook["failure"] is None


def test_an_email_that_cannot_be_sent_is_a_failure_on_the_subscription(client, reader, flow, settings):
    with socket.socket() as closed:  # nothing listens here: the mail server is down
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    Subscription.objects.create(user=reader, flow=flow, by_email=True)
    _event("execution.failed", flow)
    assert sinks.deliver_pending_events() == 0
    (attempt,) = Delivery.objects.all()
    assert (attempt.channel, attempt.status, attempt.attempt) == ("email", "RETRYING", 1)
    said = f"the mail server 127.0.0.1:{port} (EMAIL_HOST, EMAIL_PORT) refused the connection"
    assert said in attempt.error and "Error" not in attempt.error  # words, not a raw exception
    client.force_login(reader)
    profile = client.get("/account/").content.decode()
    assert said in profile and "trying again at" in profile and "ConnectionRefusedError" not in profile


def test_a_subscriber_on_success_hears_every_commit_once_a_recovery_included(reader, flow, receiver):
    Subscription.objects.create(
        user=reader,
        flow=flow,
        on_failure=False,
        on_sla_miss=False,
        on_success=True,
        by_email=False,
        webhook_url=receiver.url,
    )

    def run(job_status: str):
        execution = make_execution(flow, status="RUNNING", jobs=[{"status": job_status}])
        with transaction.atomic():
            reevaluate_execution(execution)
        return execution

    ok = run("COMMITTED")
    run("FAILED")  # not chosen
    back = run("COMMITTED")
    assert sinks.deliver_pending_events() == 3  # the failure is done too: nobody here wants it
    heard = [(body["kind"], body["executionId"]) for _path, body in receiver.received]
    assert heard == [("execution.succeeded", ok.execution_id), ("execution.recovered", back.execution_id)]


def test_the_api_takes_on_success_and_the_chat_format(reader, flow, receiver):
    api = api_client_for(reader)
    response = api.post(
        "/api/subscriptions",
        {
            "flowGroup": "sales",
            "flowName": "orders",
            "onSuccess": True,
            "email": False,
            "webhookUrl": receiver.url,
            "webhookFormat": "chat",
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["onSuccess"] and response.json()["webhookFormat"] == "chat"
    bad = api.patch(f"/api/subscriptions/{response.json()['id']}", {"webhookFormat": "xml"}, format="json")
    assert bad.status_code == 400 and "webhookFormat" in bad.json()


def test_the_alert_story_fail_re_run_the_job_recover_with_links_to_the_portal(
    client, owner, flow, receiver, settings
):
    """The issue's story without Spark: the job fails (the orchestrator rolls
    it up), the owner presses "Re-run this job", the job commits, and the
    webhook hears the failure, then the recovery, both linking to the address
    `make run BIND=127.0.0.1:8123` serves."""
    settings.SITE_URL = site_url_from_bind("127.0.0.1:8123")
    Subscription.objects.create(
        user=owner, flow=flow, on_recovery=True, by_email=False, webhook_url=receiver.url
    )
    execution = make_execution(
        flow, status="RUNNING", jobs=[{"status": "FAILED", "spec": {"properties": {}}}]
    )
    with transaction.atomic():
        reevaluate_execution(execution)
    execution.refresh_from_db()
    assert execution.status == "FAILED"
    assert sinks.deliver_pending_events() == 1

    client.force_login(owner)
    page = f"/executions/sales/orders/{execution.execution_id}/"
    job = execution.jobs.get()
    response = client.post(f"{page}jobs/{job.job_name}/rerun/", follow=True)
    assert f"Re-run of {job.job_name} requested" in response.content.decode()
    process_actions()
    JobExecution.objects.filter(pk=job.pk).update(status="COMMITTED")  # the worker's report
    with transaction.atomic():
        reevaluate_execution(execution)
    execution.refresh_from_db()
    assert execution.status == "COMMITTED"
    assert sinks.deliver_pending_events() == 1

    heard = [(body["kind"], body["executionId"], body["url"]) for _path, body in receiver.received]
    link = f"http://127.0.0.1:8123{page}"
    assert heard == [
        ("execution.failed", execution.execution_id, link),
        ("execution.recovered", execution.execution_id, link),
    ]
    card = client.get("/flows/sales/orders/").content.decode()
    assert "last delivered" in card and "(execution.recovered)" in card


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


def test_a_subscriber_reads_a_failure_without_the_servers_paths_and_traceback(
    reader, flow, receiver, settings
):
    settings.MONITORING_EMAIL_TO = ["oncall@example.org"]  # the operator's sink: everything, as staff
    Subscription.objects.create(
        user=reader, flow=flow, on_failure=True, by_email=True, webhook_url=receiver.url
    )
    message = (
        "sales/orders failed: Traceback (most recent call last):\n"
        '  File "/srv/flowport/portal/pipeline/task.py", line 12, in run\n'
        "OSError: cannot open /srv/flowport/var/secret-notes.txt"
    )
    raise_event(
        "execution.failed", message, severity=Event.Severity.ERROR, flow_group="sales", flow_name="orders"
    )
    assert sinks.deliver_pending_events() == 1
    to_rita = next(m for m in mail.outbox if m.to == ["rita@example.org"])
    hooked = receiver.received[0][1]
    for seen in (to_rita.body, json.dumps(hooked)):
        assert "/srv/flowport" not in seen and "task.py" not in seen
        assert "OSError: cannot open" in seen
    to_oncall = next(m for m in mail.outbox if m.to == ["oncall@example.org"])
    assert "/srv/flowport/var/secret-notes.txt" in to_oncall.body
