"""The flow catalog seen from the pages of the apps below it (a template pack
page counts the flows using the pack without importing flows)."""

from __future__ import annotations

from django import template

from portal.flows.packflows import flows_using_pack
from portal.templatepacks.models import TemplatePack
from portal.templatepacks.services import template_paths
from portal.topology.credentials import masked

register = template.Library()


@register.simple_tag
def pack_flow_count(pack: TemplatePack) -> int:
    """How many flows name a template of `pack`."""
    return flows_using_pack(pack.name, template_paths(pack)).count()


@register.filter
def secrets_masked(value: object) -> object:
    """A job property as the compile preview shows it: a node written before secrets in its URL
    were refused may carry one in the hop keys (portal.topology.credentials)."""
    return masked(value) if isinstance(value, str) else value
