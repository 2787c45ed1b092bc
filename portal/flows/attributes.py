"""A flow's template attributes: the values its templates ask the flow for
(gobblin.template.required_attributes and the ${…} variables no template
fills), with the description and default a template author gives them, for
the flow form's attribute inputs. The hop keys the compiler sets are never
asked for; flows.services.validate_flow refuses a flow that leaves one unset."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError

from portal.accounts.access import Principal
from portal.flows.compiler.templates import REQUIRED_KEY, declared_encrypted_attributes
from portal.flows.models import FlowConfig
from portal.templatepacks.resolution import ResolvedTemplates, TemplateLoader, resolve_with
from portal.templatepacks.services import TemplateResolutionError
from portal.templatepacks.uris import split_template_uris

# Flowport's convention for describing a template's required attributes
# (the form's help text tells template authors about it):
#   flowport.attribute.<name>.description = "Tables to pull, comma-separated"
#   flowport.attribute.<name>.default = "orders"
ATTRIBUTE_PREFIX = "flowport.attribute."
# Keys the compiler sets on every job (docs/topology.md, "hop keys"): a
# template may require them, but a flow never types them in.
COMPILER_KEYS = frozenset({"flow.group", "flow.name", "job.name", "spark.master"})
COMPILER_PREFIXES = ("flowport.hop.", "flowport.executor")


def supplied_by_compiler(name: str) -> bool:
    return name in COMPILER_KEYS or name.startswith(COMPILER_PREFIXES)


@dataclass
class TemplateAttribute:
    name: str
    description: str = ""
    default: str = ""  # suggested value, filled in for a new flow
    template_value: str = ""  # what the templates already give it
    encrypted: bool = False  # listed in gobblin.template.encrypted_attributes: typed like a secret

    @property
    def required(self) -> bool:
        return not self.template_value


@dataclass
class TemplateAttributes:
    attributes: list[TemplateAttribute] = field(default_factory=list)
    error: str = ""  # why the templates could not be read, safe to show

    @property
    def names(self) -> list[str]:
        return [attribute.name for attribute in self.attributes]

    @property
    def encrypted_names(self) -> set[str]:
        return {attribute.name for attribute in self.attributes if attribute.encrypted}


def template_loader(user: Principal) -> TemplateLoader:
    """One loader for a request's several questions, so each template is
    read and parsed once (templatepacks checks access as it loads)."""

    return TemplateLoader(user)


def _resolve(
    template_uris: str, properties: dict[str, str], user: Principal, loader: TemplateLoader | None = None
) -> ResolvedTemplates:
    return resolve_with(loader or template_loader(user), split_template_uris(template_uris), properties)


def template_attributes(
    template_uris: str, user: Principal, loader: TemplateLoader | None = None
) -> TemplateAttributes:
    """The attributes a flow sets for these templates: those listed in
    gobblin.template.required_attributes (every template in the chain) and
    the ${…} variables no template fills, minus what the compiler sets."""

    if not split_template_uris(template_uris) or user is None:
        return TemplateAttributes()
    loader = loader or template_loader(user)  # one read of each template for both questions
    try:
        resolved = _resolve(template_uris, {}, user, loader)
    except TemplateResolutionError as error:
        return TemplateAttributes(error=f"{error.uri}: {error.message}")
    except ValidationError as error:
        return TemplateAttributes(error=" ".join(error.messages))
    declared = [n.strip() for n in resolved.properties.get(REQUIRED_KEY, "").split(",") if n.strip()]
    names = [n for n in dict.fromkeys([*resolved.missing_required, *declared]) if not supplied_by_compiler(n)]
    properties = resolved.properties
    encrypted = declared_encrypted_attributes(
        FlowConfig(template_uris=template_uris, properties={}), user, loader
    )
    return TemplateAttributes(
        [
            TemplateAttribute(
                name=name,
                description=properties.get(f"{ATTRIBUTE_PREFIX}{name}.description", ""),
                default=properties.get(f"{ATTRIBUTE_PREFIX}{name}.default", ""),
                template_value=properties.get(name, ""),
                encrypted=name in encrypted,
            )
            for name in names
        ]
    )
