"""The compiler's seam to template packs (`templatepacks.services`): turns
a flow's template URIs into flat properties, or into errors the compiler
reports per flow/job instead of raising."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from portal.accounts.access import Principal
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, holds_secret, looks_encrypted
from portal.crypto.secretnames import ENCRYPTED_ATTRIBUTES_KEY, listed
from portal.pipeline.propertyrules import user_property_problems
from portal.templatepacks.resolution import TemplateLoader, TemplateResolutionError, resolve_with
from portal.topology.grants import NodeAccess

REQUIRED_KEY = "gobblin.template.required_attributes"
# Attributes a template declares secret: the flow must give them as ENC(...).
ENCRYPTED_KEY = ENCRYPTED_ATTRIBUTES_KEY


@dataclass
class Resolution:
    properties: dict[str, str]
    pinned_versions: dict[str, int] = field(default_factory=dict)
    missing_required: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    encrypted_attributes: list[str] = field(default_factory=list)


def required_attributes(properties: dict[str, str]) -> set[str]:
    return {key.strip() for key in properties.get(REQUIRED_KEY, "").split(",") if key.strip()}


def missing_attributes(
    resolution: Resolution, properties: Mapping[str, str], *, set_later: Callable[[str], bool] | None = None
) -> list[str]:
    """The required template attributes (listed in a template's required_attributes, or a ${…} no
    template fills) that `properties` leaves unset, minus those `set_later` says another step sets
    (the save judges before the compiler adds the hop keys; the compiler judges each job after)."""
    required = set(resolution.missing_required) | required_attributes(resolution.properties)
    return sorted(
        name for name in required if not properties.get(name) and not (set_later and set_later(name))
    )


def required_message(name: str) -> str:
    """The one wording of a missing required attribute, at save and in a compiled job's errors."""
    return f"{name} is required by the chosen template."


def encrypted_attributes(properties: dict[str, Any]) -> set[str]:
    return set(listed(properties.get(ENCRYPTED_KEY)))


class BatchTemplates:
    """One TemplateLoader and one NodeAccess per owner for a batch of
    compiles (a recompile batch runs in one transaction): each owner's pack
    access, templates and data-node grants are read once per batch instead of
    once per flow."""

    def __init__(self) -> None:
        self._loaders: dict[Any, Any] = {}
        self._access: dict[Any, Any] = {}

    def access_for(self, user: Principal) -> Any:
        key = getattr(user, "pk", None)
        if key not in self._access:
            self._access[key] = NodeAccess(user)
        return self._access[key]

    def loader_for(self, user: Principal) -> Any:
        key = getattr(user, "pk", None)
        if key not in self._loaders:
            self._loaders[key] = TemplateLoader(user)
        return self._loaders[key]


def declared_encrypted_attributes(flow: Any, user: Principal | None, loader: Any = None) -> set[str]:
    """Attributes declared encrypted by the flow itself and by each of its
    templates and their parents. Like required attributes, each template's
    own list counts, so a flow cannot override it away. A template that does
    not resolve declares nothing here (its error is reported elsewhere)."""
    declared = encrypted_attributes(flow.properties)
    if not flow.template_uri_list:
        return declared

    loader = loader if loader is not None else TemplateLoader(user)
    for uri in flow.template_uri_list:
        try:
            chain = loader.chain(uri)
        except TemplateResolutionError:
            continue
        for template in chain:
            declared |= encrypted_attributes({ENCRYPTED_KEY: template.plain(ENCRYPTED_KEY)})
    return declared


def clear_encrypted_attributes(
    flow: Any, user: Principal | None, declared: set[str] | None = None
) -> list[str]:
    """Declared-encrypted attributes that the flow gives in clear (not ENC(...))."""

    if declared is None:
        declared = declared_encrypted_attributes(flow, user)
    return sorted(
        name for name in declared if flow.properties.get(name) and not looks_encrypted(flow.properties[name])
    )


def clear_message(attribute: str) -> str:
    return (
        f"attribute {attribute!r} is declared encrypted ({ENCRYPTED_KEY}) but is given in clear; "
        "give it as ENC(...) (docs/keys.md)"
    )


def sealed_message(key: str) -> str:
    return (
        f"{key!r} is an ENC(...) value but holds no secret: only a password, token, key or user "
        f"name, or an attribute of a template declared in {ENCRYPTED_KEY}, is decrypted; a name or "
        "setting the pipeline reads would show in the job's progress and pages (docs/security.md)"
    )


def sealed_value_problems(flow_properties: dict[str, Any], declared: set[str]) -> list[str]:
    """The flow's ENC(...) values that the worker would leave sealed (`crypto.encrypted.holds_secret`):
    refused, so another's secret cannot come back in clear as a dataset or table name. (A template
    carries no ENC(...) value at all.)"""
    return [
        sealed_message(key)
        for key, value in sorted(flow_properties.items())
        if looks_encrypted(value) and not holds_secret(key, declared)
    ]


def template_problems(resolved: dict[str, Any], flow_properties: dict[str, Any]) -> list[str]:
    """What the templates themselves may not give (the keys the flow did not set): node-owned
    keys, classes outside the allowed packages, secrets in clear, and any ENC(...) value or
    wrapped key: a secret belongs to its owner, and a template is shared (docs/security.md)."""

    given = {k: v for k, v in resolved.items() if k not in flow_properties}
    problems = [f"template: {p}" for p in user_property_problems(given, looks_encrypted, where="a template")]
    for key, value in sorted(given.items()):
        if key == WRAPPED_KEY_PROPERTY or key.endswith("." + WRAPPED_KEY_PROPERTY):
            problems.append(f"template: {key!r} is a wrapped key; templates cannot carry keys")
        elif looks_encrypted(value):
            problems.append(f"template: {key!r} is an ENC(...) value; templates cannot carry secrets")
    return problems


def resolve_flow_templates(flow: Any, user: Principal | None, loader: Any = None) -> Resolution:
    """The flow's templates resolved for `user`, with the attributes they declare encrypted (also
    when the templates do not resolve: what the readable ones declare still holds). A flow without
    templates compiles with just its own properties."""
    uris = flow.template_uri_list
    if not uris:
        declared = encrypted_attributes(flow.properties)
        return Resolution(
            properties=dict(flow.properties),
            errors=sealed_value_problems(flow.properties, declared),
            encrypted_attributes=sorted(declared),
        )
    loader = loader if loader is not None else TemplateLoader(user)
    declared = declared_encrypted_attributes(flow, user, loader)
    try:
        resolved = resolve_with(loader, uris, dict(flow.properties))
    except TemplateResolutionError as error:
        uri = getattr(error, "uri", "")
        message = getattr(error, "message", str(error))
        return Resolution(
            properties=dict(flow.properties),
            errors=[f"template {uri}: {message}"],
            encrypted_attributes=sorted(declared),
        )
    return Resolution(
        properties=dict(resolved.properties),
        pinned_versions=dict(resolved.pinned_versions),
        missing_required=list(resolved.missing_required),
        errors=[
            *template_problems(resolved.properties, flow.properties),
            *(clear_message(name) for name in clear_encrypted_attributes(flow, user, declared)),
            *sealed_value_problems(flow.properties, declared),
        ],
        encrypted_attributes=sorted(declared),
    )
