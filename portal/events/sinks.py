"""Forwarding events to people: email (Django's mail settings) and a webhook
(a JSON POST). Delivery runs in one background thread per process, woken
after the transaction that raised an event commits, so neither the
orchestrator nor a page ever waits for a mail server. Every send has a
timeout; a failure is logged and retried with exponential backoff (30 s,
1 min, 2 min: MAX_ATTEMPTS tries in all, within MONITORING_SINK_MAX_AGE_SECONDS),
never raised; listeners are told of every attempt (monitoring shows them on
each subscription). The Event row is the queue: a delivery is claimed with a lease, so
several portal processes never send the same event twice and one that died
mid-send is retaken."""

from __future__ import annotations

import json
import logging
import os
import smtplib
import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import get_connection, send_mail
from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone

from portal.events import outbound
from portal.events.links import execution_path
from portal.events.models import Event

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 4
BATCH = 20
LEASE_SECONDS = 120
SEVERITY_RANK: dict[str, int] = {Event.Severity.INFO: 0, Event.Severity.WARNING: 1, Event.Severity.ERROR: 2}


def event_payload(event: Event) -> dict:
    """The webhook body; GaaS's camelCase names, like the REST API."""
    url = ""
    if event.flow_group and event.flow_name and event.execution_id is not None:
        url = settings.SITE_URL.rstrip("/") + execution_path(
            event.flow_group, event.flow_name, event.execution_id
        )
    return {
        "id": event.pk,
        "kind": event.kind,
        "severity": event.severity,
        "message": event.message,
        "flowGroup": event.flow_group,
        "flowName": event.flow_name,
        "executionId": event.execution_id,
        "jobName": event.job_name,
        "subject": event.subject,
        "created": event.created.isoformat(),
        "url": url,
    }


# How a webhook body is shaped: the generic JSON above, or the `{"text": ...}`
# that Slack, Mattermost and Microsoft Teams incoming webhooks accept.
JSON, CHAT = "json", "chat"


def chat_payload(event: Event) -> dict:
    """One plain-text message (chat tools link a bare URL themselves; their
    link markups differ). Its first line says what happened and to which flow."""
    payload = event_payload(event)
    where = f"{event.flow_group}/{event.flow_name}" if event.flow_group else event.subject
    lines = [f"Flowport {event.severity} {event.kind}" + (f": {where}" if where else ""), event.message]
    if event.job_name:
        lines.append(f"Job: {event.job_name}")
    if payload["url"]:
        lines.append(payload["url"])
    return {"text": "\n".join(lines)}


PAYLOADS: dict[str, Callable[[Event], dict]] = {JSON: event_payload, CHAT: chat_payload}


def send_email(event: Event, to: list[str] | None = None) -> None:
    """To the operator's MONITORING_EMAIL_TO, or to `to` (a subscriber)."""
    payload = event_payload(event)
    where = f"{event.flow_group}/{event.flow_name}" if event.flow_group else event.subject
    subject = f"[Flowport] {event.severity} {event.kind}" + (f": {where}" if where else "")
    lines = [event.message, "", f"When: {payload['created']}", f"Kind: {event.kind}"]
    if event.job_name:
        lines.append(f"Job: {event.job_name}")
    if payload["url"]:
        lines.append(f"Execution: {payload['url']}")
    lines.append(f"Dashboard: {settings.SITE_URL.rstrip('/')}/monitoring/")
    if to is not None:
        lines += [
            "",
            f"You subscribed to this flow; change or remove it at {settings.SITE_URL.rstrip('/')}/account/",
        ]
    connection = get_connection(timeout=settings.MONITORING_SINK_TIMEOUT_SECONDS)
    send_mail(
        subject[:200],
        "\n".join(lines),
        settings.MONITORING_EMAIL_FROM,
        to if to is not None else settings.MONITORING_EMAIL_TO,
        connection=connection,
    )


FILE_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
CONSOLE_BACKEND = "django.core.mail.backends.console.EmailBackend"


def email_destination() -> str:
    """Where "email" goes, said on the pages: empty when it is sent to a mail server; else
    where the embedded mode (no EMAIL_HOST) keeps it instead."""
    if settings.EMAIL_BACKEND == FILE_BACKEND:
        return (
            f"No mail server is set (EMAIL_HOST), so email is not sent: each message is written "
            f"to a file in {settings.EMAIL_FILE_PATH} on the portal's server."
        )
    if settings.EMAIL_BACKEND == CONSOLE_BACKEND:
        return "No mail server is set (EMAIL_HOST), so email is not sent: it is printed in the portal's log."
    return ""


def _mail_server() -> str:
    return f"the mail server {settings.EMAIL_HOST}:{settings.EMAIL_PORT} (EMAIL_HOST, EMAIL_PORT)"


def describe_failure(exc: BaseException) -> str:  # noqa: C901
    """Why a delivery failed, in words a subscriber can act on (shown on their pages): never
    a bare exception. The server's log keeps the exception itself."""
    if isinstance(exc, outbound.WebhookRefused | urllib.error.HTTPError):
        return str(exc)  # "HTTP Error 503: Service Unavailable", "…: a private address"
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        if isinstance(reason, ConnectionRefusedError):
            return "the webhook's server refused the connection (nothing listens at that address and port)"
        if isinstance(reason, TimeoutError | socket.timeout):
            return f"the webhook did not answer within {settings.MONITORING_SINK_TIMEOUT_SECONDS} s"
        if isinstance(reason, ssl.SSLError):
            return f"the webhook's TLS connection failed: {reason.reason or reason}"
        return f"the webhook could not be reached: {getattr(reason, 'strerror', None) or reason}"
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        return f"{_mail_server()} refused the portal's login (EMAIL_HOST_USER, EMAIL_HOST_PASSWORD)"
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return f"{_mail_server()} refused the address {', '.join(exc.recipients)}"
    if isinstance(exc, smtplib.SMTPException):
        return f"{_mail_server()} answered with an error: {exc}"
    if isinstance(exc, ConnectionRefusedError):
        return f"{_mail_server()} refused the connection: no mail server is running there"
    if isinstance(exc, TimeoutError | socket.timeout):
        return f"{_mail_server()} did not answer within {settings.MONITORING_SINK_TIMEOUT_SECONDS} s"
    if isinstance(exc, socket.gaierror):
        return f"{_mail_server()}: its name does not resolve"
    if isinstance(exc, ssl.SSLError):
        return f"{_mail_server()}: TLS failed ({exc.reason or exc}; EMAIL_USE_TLS, EMAIL_USE_SSL)"
    if isinstance(exc, OSError):
        return f"could not reach {_mail_server()}: {exc.strerror or exc}"
    if isinstance(exc, ValidationError):
        return " ".join(exc.messages)  # a subscriber's webhook the checks turn down now
    if isinstance(exc, ValueError):
        return str(exc)  # our own refusals (a webhook URL the checks turned down)
    return "an unexpected error; the portal's log has the details"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A webhook answering with a redirect is a failure: following it could
    reach a host MONITORING_WEBHOOK_ALLOWED_HOSTS keeps subscribers from."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise urllib.error.HTTPError(req.full_url, code, f"redirect to {newurl} not followed", headers, fp)


_opener = urllib.request.build_opener(_NoRedirects)
# Listeners' webhooks (typed by users) connect only to addresses outbound.py allows.
_listener_opener = outbound.pinned_opener(_NoRedirects())


_webhook_checks: list[Callable[[str], None]] = []  # see register_webhook_check


def register_webhook_check(check: Callable[[str], None]) -> None:
    """A check every listener's webhook URL passes again just before sending
    (monitoring: http(s) and MONITORING_WEBHOOK_ALLOWED_HOSTS, which may have
    changed since the URL was saved); it raises to refuse."""
    _webhook_checks.append(check)


def send_webhook(event: Event, url: str | None = None, payload_format: str = JSON) -> None:
    """To the operator's MONITORING_WEBHOOK_URL, or to a listener's `url`. The
    operator's own URL goes anywhere; a listener's connects only to an address
    that passed outbound's check (made on the address actually connected to)."""
    opener = _opener
    if url is None:
        url = settings.MONITORING_WEBHOOK_URL
        if urlsplit(url).scheme not in ("http", "https"):
            raise ValueError("MONITORING_WEBHOOK_URL must be an http(s) URL")
    else:
        for check in _webhook_checks:
            check(url)
        opener = _listener_opener
    body = json.dumps(PAYLOADS[payload_format](event)).encode()
    request = urllib.request.Request(  # noqa: S310 - scheme checked above
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "Flowport monitoring"},
    )
    with opener.open(request, timeout=settings.MONITORING_SINK_TIMEOUT_SECONDS) as response:
        response.read(1024)


@dataclass(frozen=True)
class Listeners:
    """People an app above registers for events (monitoring: users' flow
    subscriptions), served by the same sender, queue and bookkeeping as the
    operator's sinks. `kinds`: the event kinds they may want; `present`: is
    anyone listening at all (cheap); `targets`: one event's deliveries by name
    (a name accepted once is never sent again)."""

    kinds: tuple[str, ...]
    present: Callable[[], bool]
    targets: Callable[[Event], dict[str, Callable[[], None]]]
    # Does anyone want this kind for this flow (kind, flow group, flow name)?
    # Asked before raising an event only some listener wants (a success).
    flow_wants: Callable[[str, str, str], bool] | None = None
    # Told of every attempt at one of their targets, so they can show it.
    record: Callable[[Event, Attempt], None] | None = None


@dataclass(frozen=True)
class Attempt:
    """One try at one target: `error` empty when it was accepted; `retry_at`
    when it will be tried again, None when it was the last try."""

    name: str
    number: int
    error: str = ""
    retry_at: datetime | None = None


_listeners: list[Listeners] = []


def register_listeners(listeners: Listeners) -> None:
    """Called once from an AppConfig.ready (events imports no app above it)."""
    _listeners.append(listeners)


def _listening() -> list[Listeners]:
    return [listeners for listeners in _listeners if listeners.present()]


def anyone_wants(kind: str, flow_group: str, flow_name: str) -> bool:
    """Whether a listener wants events of this kind about this flow."""
    return any(
        kind in listeners.kinds
        and listeners.flow_wants is not None
        and listeners.flow_wants(kind, flow_group, flow_name)
        for listeners in _listeners
    )


def backoff_seconds(attempt: int) -> int:
    """How long after failed attempt number `attempt` (1, 2, …) the next one is:
    30 s, 1 min, 2 min, … doubling, at most an hour."""
    return min(3600, 30 * 2 ** (attempt - 1))


def configured_sinks() -> dict[str, Callable[[Event], None]]:
    sinks: dict[str, Callable[[Event], None]] = {}
    if settings.MONITORING_EMAIL_TO:
        sinks["email"] = send_email
    if settings.MONITORING_WEBHOOK_URL:
        sinks["webhook"] = send_webhook
    return sinks


def _severities() -> list[str]:
    floor = SEVERITY_RANK.get(settings.MONITORING_SINK_MIN_SEVERITY, 0)
    return [severity for severity, rank in SEVERITY_RANK.items() if rank >= floor]


def _claim(event: Event, now: datetime) -> bool:
    won = (
        Event.objects.filter(pk=event.pk, delivered_at__isnull=True)
        .filter(Q(delivery_lease_until__isnull=True) | Q(delivery_lease_until__lt=now))
        .update(
            delivery_lease_until=now + timedelta(seconds=LEASE_SECONDS),
            delivery_attempts=event.delivery_attempts + 1,
        )
    )
    return bool(won)


def _targets(
    event: Event, sinks: dict[str, Callable[[Event], None]]
) -> dict[str, tuple[Callable[[], None], Listeners | None]]:
    """Who gets this event: the operator's sinks (above the severity floor)
    and the registered listeners (a flow's subscribers, for the kinds they
    chose), each with the listeners it belongs to (None: the operator's)."""
    targets: dict[str, tuple[Callable[[], None], Listeners | None]] = {}
    if event.severity in _severities():
        targets.update({name: (partial(send, event), None) for name, send in sinks.items()})
    for listeners in _listeners:
        targets.update({name: (send, listeners) for name, send in listeners.targets(event).items()})
    return targets


def _tell(owner: Listeners | None, event: Event, attempt: Attempt) -> None:
    if owner is None or owner.record is None:
        return
    try:
        owner.record(event, attempt)
    except Exception:  # bookkeeping never stops a delivery
        logger.exception("could not record the delivery of event %s to %s", event.pk, attempt.name)


def deliver_pending_events(now: datetime | None = None, limit: int = BATCH) -> int:
    """Send undelivered recent events to every configured sink and to the
    registered listeners; returns how many were delivered everywhere. Safe to
    call from several processes."""
    sinks = configured_sinks()
    listening = _listening()
    if not sinks and not listening:
        return 0
    now = now or timezone.now()
    recent = now - timedelta(seconds=settings.MONITORING_SINK_MAX_AGE_SECONDS)
    wanted = Q(severity__in=_severities()) if sinks else Q(pk__in=[])
    for listeners in listening:
        wanted |= Q(kind__in=listeners.kinds)
    due = (
        Event.objects.filter(
            delivered_at__isnull=True,
            created__gte=recent,
            delivery_attempts__lt=MAX_ATTEMPTS,
        )
        .filter(wanted)
        .filter(Q(delivery_lease_until__isnull=True) | Q(delivery_lease_until__lt=now))
        .order_by("id")[:limit]
    )
    delivered = 0
    for event in list(due):
        if not _claim(event, now):
            continue  # another process has it
        done = list(event.delivered_to)
        errors = []
        number = event.delivery_attempts + 1  # claimed above
        next_try = timezone.now() + timedelta(seconds=backoff_seconds(number))
        too_old = event.created + timedelta(seconds=settings.MONITORING_SINK_MAX_AGE_SECONDS)
        # None: the last try (no attempts left, or the event is too old to forward by then).
        retry_at = None if number >= MAX_ATTEMPTS or next_try > too_old else next_try
        for name, (send, owner) in _targets(event, sinks).items():
            if name in done:
                continue  # accepted on an earlier attempt; do not send it twice
            try:
                send()
            except Exception as exc:
                error = describe_failure(exc)
                errors.append(f"{name}: {error}")
                logger.warning(
                    "event %s not delivered to %s: %s: %s", event.pk, name, type(exc).__name__, exc
                )
                _tell(owner, event, Attempt(name, number, error[:1000], retry_at))
            else:
                done.append(name)
                _tell(owner, event, Attempt(name, number))
        fields: dict = {"delivered_to": done, "delivery_error": "; ".join(errors)[:2000]}
        if errors:
            fields["delivery_lease_until"] = retry_at or timezone.now() + timedelta(
                seconds=backoff_seconds(number)
            )
        else:
            fields["delivered_at"] = timezone.now()
            delivered += 1
        Event.objects.filter(pk=event.pk).update(**fields)
    return delivered


# --- the background sender ----------------------------------------------------------

_wake = threading.Event()
_lock = threading.Lock()
_thread: threading.Thread | None = None
_thread_pid = 0


def _run() -> None:
    while True:
        _wake.wait(timeout=60)
        _wake.clear()
        try:
            close_old_connections()
            while deliver_pending_events() == BATCH:
                pass
        except Exception:
            logger.exception("event delivery pass failed")
        finally:
            close_old_connections()


def kick() -> None:
    """Wake this process's sender (started on first use; a forked child gets
    its own). Returns at once."""
    global _thread, _thread_pid
    if not configured_sinks() and not _listening():
        return
    with _lock:
        if _thread is None or _thread_pid != os.getpid() or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="event-sinks", daemon=True)
            _thread_pid = os.getpid()
            _thread.start()
    _wake.set()
