"""The flow catalog seen from the pages of the apps below it (a template pack
page counts the flows using the pack without importing flows)."""

from __future__ import annotations

from typing import Any

from django import template

from portal.flows.packflows import flows_using_pack
from portal.flows.shown import shown_properties
from portal.templatepacks.models import TemplatePack
from portal.templatepacks.services import template_paths

register = template.Library()


@register.simple_tag
def pack_flow_count(pack: TemplatePack) -> int:
    """How many flows name a template of `pack`."""
    return flows_using_pack(pack.name, template_paths(pack)).count()


@register.simple_tag(takes_context=True)
def job_properties(context: template.Context, properties: dict[str, Any]) -> dict[str, Any]:
    """A compiled job's properties as the compile preview shows them to its reader
    (:mod:`portal.flows.shown`): `{% job_properties job.properties as shown %}`."""
    request = context.get("request")
    return shown_properties(properties, getattr(request, "user", None))
