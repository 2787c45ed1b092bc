"""Template URIs → templates → resolved, flat job properties.

Used by the compiler (`resolve_templates`), by flow validation
(`validate_template_uris_for`) and by uploads, which check a pack's templates
*before* anything is stored (a PendingPack overlays the stored packs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db.models import F
from pyhocon import ConfigTree

from portal.flows.validators import parse_template_uri
from portal.templatepacks import hocon
from portal.templatepacks.models import JobTemplate, TemplatePack

MAX_INHERIT_DEPTH = 32
# Gobblin's templates name their parents on the classpath; in a pack, the pack is the classpath.
RESOURCE_SCHEME = "resource:///"
NO_ACCESS = "does not exist or you cannot read it"


class TemplateResolutionError(Exception):
    """A template URI that cannot be used: unknown, unreadable, invalid,
    cyclic or with an unknown parent. `message` is safe to show the user."""

    def __init__(self, uri: str, message: str) -> None:
        self.uri = uri
        self.message = message
        super().__init__(f"{uri}: {message}")


@dataclass
class ResolvedTemplates:
    properties: dict[str, str]  # flat; flow > template > parent template
    missing_required: list[str]
    pinned_versions: dict[str, int]  # template URI → PackVersion number used


@dataclass
class PendingPack:
    """Templates about to become a pack's next version (validated first)."""

    name: str
    templates: dict[str, str]  # path → text
    version_number: int


@dataclass
class LoadedTemplate:
    uri: str  # canonical pack://<pack>/<path>
    pack_name: str
    path: str
    version_number: int
    tree: ConfigTree


@dataclass
class TemplateLoader:
    user: object
    pending: PendingPack | None = None
    _cache: dict[tuple[str, str], LoadedTemplate] = field(default_factory=dict)

    def _stored(self, pack_name: str, path: str) -> JobTemplate | None:
        pack = TemplatePack.objects.visible_to(self.user).filter(name=pack_name).first()
        if pack is None or pack.current_version_id is None:
            return None
        return (
            JobTemplate.objects.select_related("version")
            .filter(version_id=pack.current_version_id, path=path)
            .first()
        )

    def locate(self, uri: str, *, relative_to: str | None = None) -> tuple[str, str]:
        """(pack name, path) for a URI; `FS:///p` maps to the one readable pack
        holding p; a bare path, or Gobblin's classpath form `resource:///p`,
        is relative to the pack `relative_to`."""
        if relative_to is not None and uri.startswith(RESOURCE_SCHEME):
            uri = uri[len(RESOURCE_SCHEME) :]
        if relative_to is not None and "://" not in uri and not uri.lower().startswith("fs:"):
            return relative_to, uri.lstrip("/")
        try:
            pack_name, path = parse_template_uri(uri)
        except ValidationError as error:
            raise TemplateResolutionError(uri, error.messages[0]) from None
        if pack_name is not None:
            return pack_name, path
        stored = JobTemplate.objects.filter(
            path=path,
            version__pack__in=TemplatePack.objects.visible_to(self.user),
            version__pack__current_version=F("version"),
        )
        if self.pending is not None:
            stored = stored.exclude(version__pack__name=self.pending.name)
        holders = set(stored.values_list("version__pack__name", flat=True))
        if self.pending and path in self.pending.templates:
            holders.add(self.pending.name)
        if not holders:
            raise TemplateResolutionError(uri, f"no template pack you can read holds {path!r}.")
        if len(holders) > 1:
            raise TemplateResolutionError(
                uri,
                f"{path!r} is in several packs ({', '.join(sorted(holders))}); "
                "use pack://<pack>/<path> to say which.",
            )
        return holders.pop(), path

    def load(self, uri: str, *, relative_to: str | None = None) -> LoadedTemplate:
        pack_name, path = self.locate(uri, relative_to=relative_to)
        key = (pack_name, path)
        if key in self._cache:
            return self._cache[key]
        canonical = f"pack://{pack_name}/{path}"
        if self.pending is not None and pack_name == self.pending.name:
            text = self.pending.templates.get(path)
            number = self.pending.version_number
            if text is None:
                raise TemplateResolutionError(uri, f"pack {pack_name!r} has no template {path!r}.")
        else:
            stored = self._stored(pack_name, path)
            if stored is None:
                raise TemplateResolutionError(uri, f"template {canonical} {NO_ACCESS}.")
            text, number = stored.text, stored.version.number
        try:
            tree = hocon.parse_template(text, canonical)
        except hocon.HoconError as error:
            raise TemplateResolutionError(uri, str(error)) from None
        loaded = LoadedTemplate(canonical, pack_name, path, number, tree)
        self._cache[key] = loaded
        return loaded

    def parents(self, template: LoadedTemplate) -> list[LoadedTemplate]:
        """The templates `template` inherits from, in the order it lists them
        (`gobblin.template.inherit` may name several, comma-separated)."""
        value = hocon.plain_value(template.tree, hocon.INHERIT_KEY)
        parents = []
        for parent_uri in (part.strip() for part in str(value or "").split(",")):
            if not parent_uri:
                continue
            try:
                parents.append(self.load(parent_uri, relative_to=template.pack_name))
            except TemplateResolutionError as error:
                raise TemplateResolutionError(
                    template.uri, f"unknown parent template {parent_uri!r}: {error.message}"
                ) from None
        return parents

    def chain(self, uri: str) -> list[LoadedTemplate]:
        """The template and its ancestors, most important first.

        As Gobblin's InheritingJobTemplate: a template wins over its parents,
        and of several parents the one listed last wins (the template falls
        back on its parents in reverse order); a template inherited twice
        (a diamond) counts once, where it is first reached. Cycles and
        unknown parents are errors naming the template that points at them."""
        root = self.load(uri)
        chain: list[LoadedTemplate] = []
        seen: set[str] = set()

        def visit(template: LoadedTemplate, path: list[LoadedTemplate]) -> None:
            if len(path) >= MAX_INHERIT_DEPTH:
                raise TemplateResolutionError(uri, f"more than {MAX_INHERIT_DEPTH} levels of parents.")
            seen.add(template.uri)
            chain.append(template)
            for parent in reversed(self.parents(template)):
                if any(parent.uri == ancestor.uri for ancestor in (*path, template)):
                    cycle = " → ".join([*(t.uri for t in (*path, template)), parent.uri])
                    raise TemplateResolutionError(uri, f"cyclic parent templates: {cycle}")
                if parent.uri not in seen:
                    visit(parent, [*path, template])

        visit(root, [])
        return chain


def resolve_with(
    loader: TemplateLoader, template_uris: list[str], flow_properties: dict[str, str]
) -> ResolvedTemplates:
    """Flow properties over the templates (earlier URIs win) over their parents."""
    layers: list[ConfigTree] = []
    required: list[str] = []
    pinned: dict[str, int] = {}
    for uri in reversed(template_uris):
        chain = loader.chain(uri)
        for template in chain:
            pinned.setdefault(template.uri, template.version_number)
            required.extend(hocon.required_attributes(template.tree))
        pinned[uri] = chain[0].version_number
        layers.extend(t.tree for t in reversed(chain))
    layers.append(hocon.tree_from_flat(flow_properties))
    try:
        properties, unresolved = hocon.resolve_layers(layers)
    except hocon.HoconError as error:
        raise TemplateResolutionError(", ".join(template_uris), str(error)) from None
    missing = [name for name in dict.fromkeys(required) if name not in properties]
    missing.extend(name for name in unresolved if name not in missing)
    return ResolvedTemplates(properties=properties, missing_required=missing, pinned_versions=pinned)


def resolve_templates(template_uris: list[str], flow_properties: dict[str, str], user) -> ResolvedTemplates:
    """The compiler's entry point: resolve a flow's templates for its owner."""
    return resolve_with(TemplateLoader(user), template_uris, flow_properties)


def validate_template_uris_for(user, template_uris: list[str]) -> None:
    """ValidationError({"template_uris": [...]}) naming each URI `user`
    cannot use (unknown, unreadable, or broken)."""
    loader = TemplateLoader(user)
    problems = []
    for uri in template_uris:
        try:
            loader.chain(uri)
        except TemplateResolutionError as error:
            problems.append(error.message if uri in error.message else f"{uri}: {error.message}")
    if problems:
        raise ValidationError({"template_uris": problems})
