"""Subscriptions: a user asks to hear about one flow's failures, SLA misses
and recoveries, by email and/or webhook. Saving one checks that the user may
read the flow and that the webhook is an http(s) URL on an allowed host;
delivery is the event sinks' job (events/sinks.py), which asks `targets_for`
per event once `listen` registered it."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from portal.accounts.access import VIEW
from portal.events import sinks
from portal.events.models import Event
from portal.flows.models import FlowConfig
from portal.monitoring.models import Subscription

FAILED = "execution.failed"
RECOVERED = "execution.recovered"
SLA_MISSED = ("sla.flow_finish_missed", "sla.job_start_missed")

# Which event kinds each subscription switch covers.
KINDS_BY_SWITCH: dict[str, tuple[str, ...]] = {
    "on_failure": (FAILED,),
    "on_sla_miss": SLA_MISSED,
    "on_recovery": (RECOVERED,),
}
SUBSCRIBABLE_KINDS: tuple[str, ...] = tuple(kind for kinds in KINDS_BY_SWITCH.values() for kind in kinds)


def host_allowed(host: str) -> bool:
    """MONITORING_WEBHOOK_ALLOWED_HOSTS: exact names, or `.domain` for a
    domain and its subdomains; empty allows any host."""
    allowed = settings.MONITORING_WEBHOOK_ALLOWED_HOSTS
    if not allowed:
        return True
    host = host.lower().rstrip(".")
    for entry in allowed:
        entry = entry.lower()
        if entry.startswith("."):
            if host == entry[1:] or host.endswith(entry):
                return True
        elif host == entry:
            return True
    return False


def validate_webhook_url(url: str) -> None:
    """http(s) only, with a host the operator allows; no credentials in it
    (they would show on pages and in the API)."""
    if not url:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValidationError("A webhook must be an http:// or https:// URL.", code="scheme")
    if not parts.hostname:
        raise ValidationError("The webhook URL has no host.", code="host")
    if parts.username or parts.password:
        raise ValidationError("Put no user or password in the webhook URL.", code="credentials")
    if not host_allowed(parts.hostname):
        raise ValidationError(
            f"Webhooks may not go to {parts.hostname}: the operator allows only "
            f"{', '.join(settings.MONITORING_WEBHOOK_ALLOWED_HOSTS)}.",
            code="host_not_allowed",
        )


def masked_webhook(url: str) -> str:
    """What pages and the API show of a webhook: its scheme and host. The
    path and query often carry a token (Slack, Teams), so they are not shown
    again after saving, like the operator's MONITORING_WEBHOOK_URL."""
    if not url:
        return ""
    parts = urlsplit(url)
    shown = f"{parts.scheme}://{parts.netloc}"
    return shown + "/…" if (parts.path not in ("", "/") or parts.query) else shown + "/"


def keep_or_replace(stored: str, posted: str) -> str:
    """A form or API call that sends back the masked webhook keeps the stored one."""
    return stored if stored and posted == masked_webhook(stored) else posted


def readable_flow(user, flow_group: str, flow_name: str) -> FlowConfig | None:
    return FlowConfig.objects.restrict(user, VIEW).filter(flow_group=flow_group, flow_name=flow_name).first()


def check(subscription: Subscription) -> None:
    """Every rule at once, each error under its field."""
    errors: dict[str, list[str]] = {}
    if not any(getattr(subscription, switch) for switch in KINDS_BY_SWITCH):
        errors.setdefault("on_failure", []).append("Choose at least one of failure, SLA miss or recovery.")
    if not subscription.by_email and not subscription.webhook_url:
        errors.setdefault("by_email", []).append("Choose email, a webhook URL, or both.")
    if subscription.by_email and not subscription.user.email:
        errors.setdefault("by_email", []).append(
            "Your account has no email address; use a webhook or ask an administrator to add one."
        )
    try:
        validate_webhook_url(subscription.webhook_url)
    except ValidationError as error:
        errors.setdefault("webhook_url", []).extend(error.messages)
    if not FlowConfig.objects.restrict(subscription.user, VIEW).filter(pk=subscription.flow_id).exists():
        errors.setdefault("flow", []).append("You may not read this flow.")
    if errors:
        raise ValidationError(errors)


def save(subscription: Subscription) -> Subscription:
    check(subscription)
    with transaction.atomic():
        subscription.save()
    return subscription


def subscription_of(user, flow: FlowConfig) -> Subscription | None:
    if not user.is_authenticated:
        return None
    return Subscription.objects.filter(user=user, flow=flow).first()


def subscriptions_of(user):
    return Subscription.objects.filter(user=user).select_related("flow")


def anyone_subscribed() -> bool:
    return Subscription.objects.exists()


def listen() -> None:
    """Register the subscribers with the event sinks (MonitoringConfig.ready):
    one sender serves the operator's sinks and them."""
    sinks.register_listeners(sinks.Listeners(SUBSCRIBABLE_KINDS, anyone_subscribed, targets_for))
    sinks.register_webhook_check(validate_webhook_url)


def wants(subscription: Subscription, kind: str) -> bool:
    return any(kind in kinds and getattr(subscription, switch) for switch, kinds in KINDS_BY_SWITCH.items())


def targets_for(event: Event) -> dict[str, Callable[[], None]]:
    """The subscribers' deliveries of one event, named `sub<id>:email` and
    `sub<id>:webhook` so a delivery accepted once is never repeated. A
    subscriber who can no longer read the flow (or is inactive) gets nothing."""
    if event.kind not in SUBSCRIBABLE_KINDS or not event.flow_group:
        return {}
    targets: dict[str, Callable[[], None]] = {}
    found = Subscription.objects.filter(
        flow__flow_group=event.flow_group, flow__flow_name=event.flow_name
    ).select_related("user", "flow")
    for subscription in found:
        user = subscription.user
        if not user.is_active or not wants(subscription, event.kind):
            continue
        if not FlowConfig.objects.restrict(user, VIEW).filter(pk=subscription.flow_id).exists():
            continue
        if subscription.by_email and user.email:
            targets[f"sub{subscription.pk}:email"] = partial(sinks.send_email, event, [user.email])
        if subscription.webhook_url:
            targets[f"sub{subscription.pk}:webhook"] = partial(
                sinks.send_webhook, event, subscription.webhook_url
            )
    return targets


def describe(subscription: Subscription) -> str:
    """ "failure, SLA miss by email and webhook", for pages and messages."""
    labels = {"on_failure": "failure", "on_sla_miss": "SLA miss", "on_recovery": "recovery"}
    what = ", ".join(label for switch, label in labels.items() if getattr(subscription, switch))
    how = " and ".join(
        channel
        for channel, chosen in (("email", subscription.by_email), ("webhook", bool(subscription.webhook_url)))
        if chosen
    )
    return f"{what} by {how}"
