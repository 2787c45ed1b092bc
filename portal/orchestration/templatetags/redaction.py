"""`{% load redaction %}{{ job.message|shown_to:user }}`: a failure message or log text as the
signed-in reader may read it (portal.orchestration.redaction), on every page that shows one."""

from __future__ import annotations

from typing import Any

from django import template

from portal.accounts.access import Principal
from portal.orchestration import redaction

register = template.Library()


@register.filter
def shown_to(text: Any, user: Principal) -> str:
    return redaction.for_viewer(user)("" if text is None else str(text))
