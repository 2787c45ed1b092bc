"""The flow catalog seen from the pages of the apps below it (a template pack
page counts the flows using the pack without importing flows)."""

from __future__ import annotations

from django import template

from portal.flows.packflows import flows_using_pack
from portal.flows.shown import shown_property
from portal.templatepacks.models import TemplatePack
from portal.templatepacks.services import template_paths

register = template.Library()


@register.simple_tag
def pack_flow_count(pack: TemplatePack) -> int:
    """How many flows name a template of `pack`."""
    return flows_using_pack(pack.name, template_paths(pack)).count()


@register.simple_tag
def job_property(key: str, value: object) -> object:
    """A job property as the compile preview shows it (:mod:`portal.flows.shown`):
    `{% job_property key value %}`."""
    return shown_property(key, value)
