"""Executions seen from the flow pages, which sit below this app: the flow list
loads its page's runs at a glance here (`{% flows_at_a_glance page as glance %}`)
instead of importing them."""

from __future__ import annotations

from collections.abc import Iterable

from django import template

from portal.flows.models import FlowConfig
from portal.orchestration.models import FlowExecution
from portal.orchestration.state import glance, statestore

register = template.Library()


@register.simple_tag
def flows_at_a_glance(flows: Iterable[FlowConfig]) -> glance.PageGlance:
    """The flows (a page of the list) with their last, next and recent runs."""
    return glance.for_page(flows)


@register.inclusion_tag("orchestration/state/_flow_waiting.html", takes_context=True)
def flow_waiting(context: template.Context, flow: FlowConfig) -> dict:
    """The flow page's "N datasets waiting to be finished": `{% flow_waiting flow %}`."""
    user = context.get("user")
    waiting = statestore.waiting_datasets(flow.pk, flow.flow_group, flow.flow_name)
    return {"waiting": waiting, "staff": bool(user and user.is_staff)}


@register.simple_tag
def last_run_on_save(flow: FlowConfig) -> FlowExecution | None:
    """The flow's newest execution a save started (`{% last_run_on_save flow as saved %}`): its
    page says so beside "Run immediately: no" (a flow saved without a schedule runs once when
    saved, whatever the flag), so the two never seem to disagree. One indexed query."""
    return (
        FlowExecution.objects.filter(flow=flow, trigger=FlowExecution.Trigger.RUN_IMMEDIATELY)
        .order_by("-execution_id")
        .only("execution_id", "flow_group", "flow_name", "created", "scheduled_at")
        .first()
    )
