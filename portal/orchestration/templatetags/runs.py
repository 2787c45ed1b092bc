"""Executions seen from the flow pages, which sit below this app: the flow list
loads its page's runs at a glance here (`{% flows_at_a_glance page as glance %}`)
instead of importing them."""

from __future__ import annotations

from collections.abc import Iterable

from django import template

from portal.flows.models import FlowConfig
from portal.orchestration.state import glance

register = template.Library()


@register.simple_tag
def flows_at_a_glance(flows: Iterable[FlowConfig]) -> glance.PageGlance:
    """The flows (a page of the list) with their last, next and recent runs."""
    return glance.for_page(flows)
