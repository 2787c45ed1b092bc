"""Refusals that name a data node's page become links to it: the compiler's "ask its owners
… Request access on /topology/datanodes/<name>/" (topology.grants.NodeAccess.refusal) is text,
so the API and logs read it as it is, and the flow form shows it as a link to the page where
the owners are named and access is asked for."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from portal.topology.validators import NAME_PATTERN

register = template.Library()

_PAGE = re.compile(rf"/topology/datanodes/({NAME_PATTERN})/")


@register.filter
def node_links(value: object) -> SafeString:
    """The text escaped, each data node page in it a link (`…/topology/datanodes/<name>/`)."""
    text = str(value)
    parts, last = [], 0
    for match in _PAGE.finditer(text):
        parts.append(escape(text[last : match.start()]))
        parts.append(format_html('<a href="{}">{}</a>', match[0], match[0]))
        last = match.end()
    parts.append(escape(text[last:]))
    return mark_safe("".join(parts))  # noqa: S308 - every piece escaped above
