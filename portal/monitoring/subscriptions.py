"""Subscriptions: a user asks to hear about one flow's failures, SLA misses,
recoveries and (if asked) successes, by email and/or webhook (generic JSON or
a chat tool's `{"text": ...}`). Saving one checks that the user may read the
flow and that the webhook is an http(s) URL on an allowed host that is no
internal address (events.outbound, checked again at each delivery);
delivery is the event sinks' job (events/sinks.py), which asks `targets_for`
per event once `listen` registered it, and reports every attempt to
`record_attempt`: each subscription shows its last delivery and failures."""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from portal.accounts.access import VIEW
from portal.events import notifications, outbound, outcomes, sinks
from portal.events.models import Event
from portal.flows.models import FlowConfig
from portal.monitoring.models import Delivery, Subscription
from portal.orchestration.redaction import for_viewer

FAILED = outcomes.FAILED
RECOVERED = outcomes.RECOVERED
SUCCEEDED = outcomes.SUCCEEDED
# A change-data-capture slot lagging, idle or lost (portal.monitoring.slots) is the data falling behind.
SLA_MISSED = (
    "sla.flow_finish_missed",
    "sla.job_start_missed",
    "sla.dataset_stale",
    "cdc.slot_lagging",
    "cdc.slot_inactive",
    "cdc.slot_lost",
)

# Which event kinds each subscription switch covers (a recovery is a success too).
KINDS_BY_SWITCH: dict[str, tuple[str, ...]] = {
    "on_failure": (FAILED,),
    "on_sla_miss": SLA_MISSED,
    "on_recovery": (RECOVERED,),
    "on_success": (SUCCEEDED, RECOVERED),
}
KEEP_DELIVERIES = 50
# The channel every subscription has: the subscriber's notifications in the portal.
PORTAL = "portal"
# What a subscriber chooses (events and channels), the same on the page and in the API.
CHOICES = (
    "on_failure",
    "on_sla_miss",
    "on_recovery",
    "on_success",
    "by_email",
    "webhook_url",
    "webhook_format",
)
SUBSCRIBABLE_KINDS: tuple[str, ...] = tuple(
    dict.fromkeys(kind for kinds in KINDS_BY_SWITCH.values() for kind in kinds)
)


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


def validate_webhook_url(url: str, *, resolve: bool = True) -> None:
    """http(s) only, with a host the operator allows; no credentials in it
    (they would show on pages and in the API). With `resolve`, also where the
    host points now (events.outbound: no internal address, not the portal):
    a hint at save time, as DNS can change; delivery checks the address it
    connects to, so the sender passes resolve=False here."""
    if not url:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValidationError("A webhook must be an http:// or https:// URL.", code="scheme")
    if not parts.hostname:
        raise ValidationError("The webhook URL has no host.", code="host")
    if parts.username or parts.password:
        raise ValidationError("Put no user or password in the webhook URL.", code="credentials")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValidationError(
            "The webhook URL's port is not a number from 0 to 65535.", code="port"
        ) from None
    if not host_allowed(parts.hostname):
        raise ValidationError(
            f"Webhooks may not go to {parts.hostname}: the operator allows only "
            f"{', '.join(settings.MONITORING_WEBHOOK_ALLOWED_HOSTS)}.",
            code="host_not_allowed",
        )
    reason = outbound.host_refusal(parts.hostname, port) if resolve else None
    if reason:
        raise ValidationError(
            f"Webhooks may not go to {parts.hostname}: {reason}; {outbound.ADVICE}.", code="internal_host"
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
        errors.setdefault("on_failure", []).append(
            "Choose at least one of failure, SLA miss, recovery or success."
        )
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
    sinks.register_listeners(
        sinks.Listeners(
            SUBSCRIBABLE_KINDS,
            anyone_subscribed,
            targets_for,
            flow_wants=flow_wanted,
            record=record_attempt,
        )
    )
    sinks.register_webhook_check(partial(validate_webhook_url, resolve=False))


def wants(subscription: Subscription, kind: str) -> bool:
    return any(kind in kinds and getattr(subscription, switch) for switch, kinds in KINDS_BY_SWITCH.items())


def flow_wanted(kind: str, flow_group: str, flow_name: str) -> bool:
    """Whether a subscriber of this flow has a switch on for this kind (one query)."""
    switches = [switch for switch, kinds in KINDS_BY_SWITCH.items() if kind in kinds]
    if not switches:
        return False
    chosen = Q()
    for switch in switches:
        chosen |= Q(**{switch: True})
    return Subscription.objects.filter(
        chosen, flow__flow_group=flow_group, flow__flow_name=flow_name, user__is_active=True
    ).exists()


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
        seen = _as_read_by(event, user)
        # Always on the subscriber's own list in the portal (events.notifications), whatever else.
        targets[f"sub{subscription.pk}:{PORTAL}"] = partial(notifications.notify, seen, user)
        if subscription.by_email and user.email:
            targets[f"sub{subscription.pk}:email"] = partial(sinks.send_email, seen, [user.email])
        if subscription.webhook_url:
            targets[f"sub{subscription.pk}:webhook"] = partial(
                sinks.send_webhook, seen, subscription.webhook_url, subscription.webhook_format
            )
    return targets


def record_attempt(event: Event, attempt: sinks.Attempt) -> None:
    """Keep one attempt at `sub<id>:<channel>` for the subscription's pages,
    then drop what is beyond its newest KEEP_DELIVERIES."""
    label, _, channel = attempt.name.partition(":")
    if not label.startswith("sub") or not label[3:].isdigit() or channel == PORTAL:
        return  # the portal's own list is its own report
    subscription = Subscription.objects.filter(pk=int(label[3:])).first()
    if subscription is None:
        return  # removed meanwhile
    if not attempt.error:
        status = Delivery.Status.DELIVERED
    else:
        status = Delivery.Status.RETRYING if attempt.retry_at else Delivery.Status.FAILED
    error = attempt.error
    if subscription.webhook_url:  # its path may be a token: never kept in plain text
        error = error.replace(subscription.webhook_url, masked_webhook(subscription.webhook_url))
    Delivery.objects.create(
        subscription=subscription,
        channel=channel,
        event_id=event.pk,
        kind=event.kind,
        execution_id=event.execution_id,
        status=status,
        attempt=attempt.number,
        error=error,
        retry_at=attempt.retry_at,
    )
    kept = subscription.deliveries.order_by("-id").values_list("id", flat=True)[KEEP_DELIVERIES:][:1]
    oldest_kept = list(kept)
    if oldest_kept:
        subscription.deliveries.filter(id__lte=oldest_kept[0]).delete()


def delivery_report(subscription: Subscription) -> list[dict]:
    """Per channel the subscription uses: its last delivery and, when the
    newest attempt failed, that attempt ("last delivered … / failed: …")."""
    used = (("email", subscription.by_email), ("webhook", bool(subscription.webhook_url)))
    report = []
    for channel in (name for name, chosen in used if chosen):
        attempts = subscription.deliveries.filter(channel=channel)
        newest = attempts.first()
        report.append(
            {
                "channel": channel,
                # Where "delivered" email went when no mail server is set (the embedded mode).
                "note": sinks.email_destination() if channel == "email" else "",
                "delivered": attempts.filter(status=Delivery.Status.DELIVERED).first(),
                "failure": newest if newest and newest.status != Delivery.Status.DELIVERED else None,
            }
        )
    return report


def _as_read_by(event: Event, user) -> Event:
    """The event as its subscriber may read it: a failure message without the server's paths and
    tracebacks unless they are staff (portal.orchestration.redaction), as on the pages."""
    shown = for_viewer(user)(event.message)
    if shown == event.message:
        return event
    redacted = copy.copy(event)  # read only by the sinks; never saved
    redacted.message = shown
    return redacted


def describe(subscription: Subscription) -> str:
    """ "failure, SLA miss by email and webhook", for pages and messages."""
    labels = {
        "on_failure": "failure",
        "on_sla_miss": "SLA miss",
        "on_recovery": "recovery",
        "on_success": "success",
    }
    what = ", ".join(label for switch, label in labels.items() if getattr(subscription, switch))
    how = " and ".join(
        channel
        for channel, chosen in (("email", subscription.by_email), ("webhook", bool(subscription.webhook_url)))
        if chosen
    )
    if subscription.webhook_url and subscription.webhook_format == Subscription.WebhookFormat.CHAT:
        how = how.replace("webhook", "chat webhook")
    return f"{what} by {how}" if how else f"{what} in your notifications only"
