"""Template URIs → templates → resolved, flat job properties.

Used by the compiler (`resolve_templates`), by flow validation
(`validate_template_uris_for`) and by uploads, which check a pack's templates
*before* anything is stored (a PendingPack overlays the stored packs).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property

from django.core.exceptions import ValidationError
from django.db.models import F, QuerySet
from pyhocon import ConfigTree

from portal.accounts.access import Principal
from portal.templatepacks import hocon
from portal.templatepacks.models import JobTemplate, TemplatePack
from portal.templatepacks.uris import parse_template_uri

MAX_INHERIT_DEPTH = 32
# Gobblin's templates name their parents on the classpath; in a pack, the pack is the classpath.
RESOURCE_SCHEME = "resource:///"
NO_ACCESS = "does not exist or you cannot read it"


class TemplateResolutionError(Exception):
    """A template URI that cannot be used: unknown, unreadable, invalid,
    too deep or with an unknown parent. `message` is safe to show the user."""

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
    tree: ConfigTree  # shared through the caches below: never modify it
    key: int | None = None  # the stored JobTemplate's id; None for a pending upload

    # The settings read before resolution, read once per template (pyhocon's
    # key lookup is slow enough to matter when thousands of flows compile).
    @property
    def inherit(self) -> str | int | float | None:
        return self._plain(hocon.INHERIT_KEY)

    @property
    def required(self) -> list[str]:
        if "_required" not in self.__dict__:
            self.__dict__["_required"] = hocon.required_attributes(self.tree)
        return self.__dict__["_required"]

    def _plain(self, key: str) -> str | int | float | None:
        memo = self.__dict__.setdefault("_plain_values", {})
        if key not in memo:
            memo[key] = hocon.plain_value(self.tree, key)
        return memo[key]

    def plain(self, key: str) -> str | int | float | None:
        return self._plain(key)


class _Lru:
    """A small thread-safe LRU map. Stored templates never change (a change is
    a new pack version with new rows), so entries keyed by template ids never
    go stale; the bound only caps memory."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key, value) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


# HOCON parsed once per stored template (so once per pack version), and
# resolutions once per (template versions, flow properties).
PARSED = _Lru(4096)
RESOLVED = _Lru(16384)


def _parsed(template_id: int, pack_name: str, path: str, number: int) -> LoadedTemplate:
    """A stored template, parsed once per process (stored rows never change)."""
    loaded = PARSED.get(template_id)
    if loaded is None:
        text = JobTemplate.objects.filter(pk=template_id).values_list("text", flat=True).get()
        canonical = f"pack://{pack_name}/{path}"
        loaded = LoadedTemplate(
            canonical, pack_name, path, number, hocon.parse_template(text, canonical), template_id
        )
        PARSED.put(template_id, loaded)
    return loaded


@dataclass
class TemplateLoader:
    user: Principal | None
    pending: PendingPack | None = None
    _cache: dict[tuple[str, str], LoadedTemplate] = field(default_factory=dict)
    _located: dict[tuple[str, str | None], tuple[str, str]] = field(default_factory=dict)
    _stored_missing: set[tuple[str, str]] = field(default_factory=set)

    @cached_property
    def _readable(self) -> QuerySet[TemplatePack]:
        """The packs `user` may read: their access rule (the user's groups) is read once per loader."""
        return TemplatePack.objects.restrict(self.user)

    def _stored(self, pack_name: str, path: str) -> tuple[int, int] | None:
        """(JobTemplate id, version number) of the pack's current version, if
        `user` may read the pack. The text is read only when not yet parsed."""
        version_id = (
            self._readable.filter(name=pack_name).values_list("current_version_id", flat=True).first()
        )
        if version_id is None:
            return None
        return (
            JobTemplate.objects.filter(version_id=version_id, path=path)
            .values_list("pk", "version__number")
            .first()
        )

    def locate(self, uri: str, *, relative_to: str | None = None) -> tuple[str, str]:
        """(pack name, path) for a URI; `FS:///p` maps to the one readable pack
        holding p; a bare path, or Gobblin's classpath form `resource:///p`,
        is relative to the pack `relative_to`."""
        key = (uri, relative_to)
        if key not in self._located:
            self._located[key] = self._locate(uri, relative_to=relative_to)
        return self._located[key]

    def _locate(self, uri: str, *, relative_to: str | None = None) -> tuple[str, str]:
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
            version__pack__in=self._readable,
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
        if key in self._stored_missing:
            raise TemplateResolutionError(uri, f"template {canonical} {NO_ACCESS}.")
        try:
            if self.pending is not None and pack_name == self.pending.name:
                text = self.pending.templates.get(path)
                number = self.pending.version_number
                if text is None:
                    raise TemplateResolutionError(uri, f"pack {pack_name!r} has no template {path!r}.")
                tree = hocon.parse_template(text, canonical)
                loaded = LoadedTemplate(canonical, pack_name, path, number, tree)
            else:
                stored = self._stored(pack_name, path)
                if stored is None:
                    # Remembered too: a batch of one owner's flows asks once.
                    self._stored_missing.add(key)
                    raise TemplateResolutionError(uri, f"template {canonical} {NO_ACCESS}.")
                loaded = _parsed(stored[0], pack_name, path, stored[1])
        except hocon.HoconError as error:
            raise TemplateResolutionError(uri, str(error)) from None
        self._cache[key] = loaded
        return loaded

    def parents(self, template: LoadedTemplate) -> list[LoadedTemplate]:
        """The templates `template` inherits from, in the order it lists them
        (`gobblin.template.inherit` may name several, comma-separated)."""
        parents = []
        for parent_uri in (part.strip() for part in str(template.inherit or "").split(",")):
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
        back on its parents in reverse order); every template counts once,
        where it is first reached. So a template inherited twice (a diamond)
        and a loop of templates that inherit each other (a → b → a) resolve
        as Gobblin resolves them: the loop's way back to a template already
        inherited is not followed again. An unknown parent is an error naming
        the template that points at it."""
        root = self.load(uri)
        chain: list[LoadedTemplate] = []
        seen: set[str] = set()

        def visit(template: LoadedTemplate, depth: int) -> None:
            if depth >= MAX_INHERIT_DEPTH:
                raise TemplateResolutionError(uri, f"more than {MAX_INHERIT_DEPTH} levels of parents.")
            seen.add(template.uri)
            chain.append(template)
            for parent in reversed(self.parents(template)):
                if parent.uri not in seen:
                    visit(parent, depth + 1)

        visit(root, 0)
        return chain


def resolve_with(
    loader: TemplateLoader, template_uris: list[str], flow_properties: dict[str, str]
) -> ResolvedTemplates:
    """Flow properties over the templates (earlier URIs win) over their parents.

    The result is cached by the templates' stored ids (immutable, so by pack
    version) and the flow's properties: copies of one flow cost one lookup."""
    layers: list[ConfigTree] = []
    required: list[str] = []
    pinned: dict[str, int] = {}
    keys: list[int | None] = []
    for uri in reversed(template_uris):
        chain = loader.chain(uri)
        for template in chain:
            pinned.setdefault(template.uri, template.version_number)
            required.extend(template.required)
            keys.append(template.key)
        pinned[uri] = chain[0].version_number
        layers.extend(t.tree for t in reversed(chain))
    cache_key = None
    if None not in keys:
        cache_key = (tuple(template_uris), tuple(keys), tuple(sorted(map(repr, flow_properties.items()))))
        cached = RESOLVED.get(cache_key)
        if cached is not None:
            return ResolvedTemplates(
                properties=dict(cached.properties),
                missing_required=list(cached.missing_required),
                pinned_versions=dict(pinned),
            )
    resolved = _resolve(layers, required, pinned, template_uris, flow_properties)
    if cache_key is not None:
        RESOLVED.put(cache_key, resolved)
        return ResolvedTemplates(
            properties=dict(resolved.properties),
            missing_required=list(resolved.missing_required),
            pinned_versions=dict(pinned),
        )
    return resolved


def _resolve(
    layers: list[ConfigTree],
    required: list[str],
    pinned: dict[str, int],
    template_uris: list[str],
    flow_properties: dict[str, str],
) -> ResolvedTemplates:
    layers = [*layers, hocon.tree_from_flat(flow_properties)]
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


def validate_template_uris_for(user, template_uris: list[str], loader: TemplateLoader | None = None) -> None:
    """ValidationError({"template_uris": [...]}) naming each URI `user`
    cannot use (unknown, unreadable, or broken). `loader`, one for `user`, is
    shared with what follows the check (a flow's save resolves the same templates)."""
    loader = loader if loader is not None else TemplateLoader(user)
    problems = []
    for uri in template_uris:
        try:
            loader.chain(uri)
        except TemplateResolutionError as error:
            problems.append(error.message if uri in error.message else f"{uri}: {error.message}")
    if problems:
        raise ValidationError({"template_uris": problems})
