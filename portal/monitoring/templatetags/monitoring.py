"""Template helpers of the monitoring pages, and `{% flow_chart %}` for the
flow page: `{% load monitoring %}{% flow_chart flow.flow_group flow.flow_name %}`."""

from __future__ import annotations

from django import template
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from portal.events.links import execution_path
from portal.flows.capture import captures_changes
from portal.monitoring import history, subscriptions
from portal.monitoring.charts import format_count, format_duration
from portal.pipeline import backfills, watermarks

register = template.Library()


@register.simple_tag
def execution_url(flow_group: str, flow_name: str, execution_id: int) -> str:
    return execution_path(flow_group, flow_name, execution_id)


@register.simple_tag
def dataset_url(state) -> str:
    return reverse(
        "monitoring:dataset", args=[state.flow_group, state.flow_name, state.job_name, state.dataset_urn]
    )


@register.filter
def duration(seconds: float | None) -> str:
    return "—" if seconds is None else format_duration(seconds)


@register.filter
def took(started, ended) -> str:
    """How long from `started` to `ended`, to the second (`timesince` rounds a 20 s run to 0 minutes)."""
    if started is None or ended is None:
        return "—"
    return format_duration(max(0.0, (ended - started).total_seconds()))


@register.filter
def for_how_long(since) -> str:
    """How long from ``since`` to now, to the second (``timesince`` says "0 minutes" for a minute)."""
    if since is None:
        return "—"
    return format_duration(max(0.0, (timezone.now() - since).total_seconds()))


@register.filter
def ago(moment) -> str:
    """``5 minutes ago``, ``12 s ago`` under a minute (``timesince`` says "0 minutes"), ``just
    now`` under a second; "—" for none."""
    if moment is None:
        return "—"
    seconds = (timezone.now() - moment).total_seconds()
    if seconds < 1:
        return "just now"
    if seconds < 60:
        return f"{int(seconds)} s ago"
    return f"{timesince(moment)} ago"


@register.filter
def count(value: float | None) -> str:
    return "—" if value is None else format_count(value)


@register.filter
def percent(fraction: float | None) -> str:
    return "" if fraction is None else f"{fraction * 100:.0f}%"


@register.inclusion_tag("monitoring/partials/flow_chart.html")
def flow_chart(flow_group: str, flow_name: str) -> dict:
    """The flow's run chart, rendered in place (no extra request); it then
    refreshes itself by htmx while the flow has an unfinished execution."""
    return history.flow_chart_context(flow_group, flow_name)


@register.simple_tag
def watermark(stored: str | None, limit: int = 0) -> str:
    """``{% watermark state.watermark %}``: the watermark as a person reads it, short (a files one
    as its file's modification time and shortened name), its raw value on hover; "—" when none."""
    value = backfills.shown(stored, short=True)
    if not value:
        return "—"
    text = value if not limit or len(value) <= limit else value[: limit - 1] + "…"
    raw = watermarks.value_of(stored) or ""
    if raw == text:
        return format_html("<code>{}</code>", text)
    return format_html('<code title="{}" data-raw="{}">{}</code>', raw, raw, text)


@register.inclusion_tag("monitoring/partials/flow_subscription.html", takes_context=True)
def flow_subscription(context, flow) -> dict:
    """The flow page's "Your subscription" card: `{% flow_subscription flow %}`."""
    subscription = subscriptions.subscription_of(context["request"].user, flow)
    return {
        "flow": flow,
        "subscription": subscription,
        "summary": subscriptions.describe(subscription) if subscription else "",
        "report": subscriptions.delivery_report(subscription) if subscription else [],
        "csrf_token": context.get("csrf_token"),
    }


@register.inclusion_tag("monitoring/partials/my_subscriptions.html", takes_context=True)
def my_subscriptions(context) -> dict:
    """The profile's list of the user's subscriptions: `{% my_subscriptions %}`."""
    found = subscriptions.subscriptions_of(context["request"].user)
    return {
        "rows": [
            (subscription, subscriptions.describe(subscription), subscriptions.delivery_report(subscription))
            for subscription in found
        ],
        "csrf_token": context.get("csrf_token"),
    }


@register.filter
def masked_webhook(url: str) -> str:
    return subscriptions.masked_webhook(url)


@register.inclusion_tag("monitoring/partials/flow_slot_card.html")
def flow_slot(flow) -> dict:
    """The flow page's replication slot card, for a flow that captures changes: `{% flow_slot flow %}`.
    It renders a placeholder that loads the reading (a connection to the source server) by htmx."""
    return {"flow": flow, "show": captures_changes(flow)}
