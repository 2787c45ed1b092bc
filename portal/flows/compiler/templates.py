"""The compiler's seam to template packs (`templatepacks.services`): turns
a flow's template URIs into flat properties, or into errors the compiler
reports per flow/job instead of raising."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

REQUIRED_KEY = "gobblin.template.required_attributes"


@dataclass
class Resolution:
    properties: dict[str, str]
    pinned_versions: dict[str, int] = field(default_factory=dict)
    missing_required: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def required_attributes(properties: dict[str, str]) -> set[str]:
    return {key.strip() for key in properties.get(REQUIRED_KEY, "").split(",") if key.strip()}


def resolve_flow_templates(flow: Any, user: Any) -> Resolution:
    """A flow without templates compiles with just its own properties."""
    uris = flow.template_uri_list
    if not uris:
        return Resolution(properties=dict(flow.properties))
    try:
        from portal.templatepacks.services import TemplateResolutionError, resolve_templates
    except ImportError:
        return Resolution(
            properties=dict(flow.properties),
            errors=[
                "Template resolution is not available (portal.templatepacks.services.resolve_templates)."
            ],
        )
    try:
        resolved = resolve_templates(uris, dict(flow.properties), user)
    except TemplateResolutionError as error:
        uri = getattr(error, "uri", "")
        message = getattr(error, "message", str(error))
        return Resolution(properties=dict(flow.properties), errors=[f"template {uri}: {message}"])
    return Resolution(
        properties=dict(resolved.properties),
        pinned_versions=dict(resolved.pinned_versions),
        missing_required=list(resolved.missing_required),
    )
