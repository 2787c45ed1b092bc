"""Executions seen from the flow pages, which sit below this app: the flow list
loads its page's runs at a glance here (`{% flows_at_a_glance page as glance %}`)
instead of importing them."""

from __future__ import annotations

from collections.abc import Iterable

from django import template

from portal.flows.models import FlowConfig
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
