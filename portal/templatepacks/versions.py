"""Any two versions of a pack side by side: what each holds and what changed
between them. Versions are immutable rows, so a comparison is two reads and a
difflib pass over at most the two versions' templates (never the history)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import QuerySet

from portal.templatepacks.audit import templates_diff
from portal.templatepacks.models import JobTemplate, PackVersion, TemplatePack


@dataclass
class Comparison:
    old: PackVersion
    new: PackVersion
    diff: str
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not (self.added or self.removed or self.changed)


def versions_of(pack: TemplatePack) -> QuerySet[PackVersion]:
    return pack.versions.select_related("created_by").order_by("-number")


def templates_of(version: PackVersion) -> dict[str, str]:
    return dict(JobTemplate.objects.filter(version=version).order_by("path").values_list("path", "text"))


def compare(old: PackVersion, new: PackVersion) -> Comparison:
    """What changed from `old` to `new` (either order: an older `new` shows
    what a roll-back to it would undo)."""
    before, after = templates_of(old), templates_of(new)
    result = Comparison(old=old, new=new, diff=templates_diff(before, after))
    for path in sorted(set(before) | set(after)):
        if path not in before:
            result.added.append(path)
        elif path not in after:
            result.removed.append(path)
        elif before[path] != after[path]:
            result.changed.append(path)
        else:
            result.unchanged.append(path)
    return result
