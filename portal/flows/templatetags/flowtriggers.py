"""A flow's triggers on its page: what starts it ("runs when …"), what it feeds, its freshness goal."""

from __future__ import annotations

from typing import Any

from django import template

from portal.accounts import access
from portal.flows.models import FlowConfig
from portal.flows.triggers import services as trigger_services
from portal.flows.triggers.models import FreshnessGoal

register = template.Library()


@register.inclusion_tag("flows/partials/triggers.html", takes_context=True)
def flow_triggers(context: Any, flow: FlowConfig) -> dict[str, Any]:
    user = context["request"].user
    return {
        "flow": flow,
        "runs_when": trigger_services.runs_when(flow),
        "feeds": trigger_services.feeds(flow),
        "goals": list(FreshnessGoal.objects.filter(flow=flow)),
        "can_change": access.can(user, access.CHANGE, flow),
    }
