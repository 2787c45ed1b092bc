"""The choices the flow form offers: the data nodes to pick a source from
(grouped by kind: those the flow's owner may read), the destinations (those
they may write, topology.grants) and the templates of the packs they may read
(accounts.access decides). Read-only; a value the flow already holds stays
selectable, so editing never loses it."""

from __future__ import annotations

from typing import Any

from django.db.models import F

from portal.accounts.access import Principal
from portal.templatepacks.models import JobTemplate, TemplatePack
from portal.topology import grants as node_access
from portal.topology.models import DataNode

Choices = list[Any]  # Django's select choices: (value, label) pairs and (group, [pairs]) groups


def _usable(user: Principal, action: str) -> list[DataNode]:
    nodes = node_access.usable_nodes(user, action)
    return list(nodes.only("name", "kind", "description").order_by("name"))


def source_nodes(user: Principal) -> list[DataNode]:
    """The nodes `user` may read from: a flow's possible sources."""
    return _usable(user, node_access.READ)


def destination_nodes(user: Principal) -> list[DataNode]:
    """The nodes `user` may write to: a flow's possible destinations."""
    return _usable(user, node_access.WRITE)


def node_label(node: DataNode, limit: int = 70) -> str:
    """`lake — Parquet lake on HDFS` (the description cut to fit a select)."""
    description = " ".join(node.description.split())
    if len(description) > limit:
        description = description[: limit - 1].rstrip() + "…"
    return f"{node.name} — {description}" if description else node.name


def source_choices(nodes: list[DataNode], current: str = "") -> Choices:
    """Select choices grouped by node kind; a current value that is not a
    data node (any more) stays selectable so editing never loses it."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for node in nodes:
        groups.setdefault(node.get_kind_display(), []).append((node.name, node_label(node)))
    choices: Choices = [("", "— choose the source data node —"), *groups.items()]
    if current and current not in {node.name for node in nodes}:
        if DataNode.objects.filter(name=current).exists():
            choices.append(("Not yours to read", [(current, f"{current} (no read grant)")]))
        else:
            choices.append(("Not in the topology", [(current, f"{current} (not a data node)")]))
    return choices


def template_groups(user: Principal) -> list[tuple[str, list[tuple[str, str]]]]:
    """[(pack name, [(template URI, path), …]), …] of the packs `user` may
    read (accounts.access decides), current versions only."""
    rows = (
        JobTemplate.objects.filter(
            version__pack__in=TemplatePack.objects.restrict(user),
            version__pack__current_version=F("version"),
        )
        .order_by("version__pack__name", "path")
        .values_list("version__pack__name", "path")
    )
    groups: dict[str, list[tuple[str, str]]] = {}
    for pack, path in rows:
        groups.setdefault(pack, []).append((f"pack://{pack}/{path}", path))
    return list(groups.items())


def template_choices(user: Principal, current: str = "") -> Choices:
    groups = template_groups(user) if user is not None else []
    offered = {uri for _pack, templates in groups for uri, _path in templates}
    choices: Choices = [("", "— no template —"), *groups]
    if current and current not in offered:
        # Several URIs, the FS:/// form, or a pack the owner can no longer
        # read: kept as it is, and reported by validation if it is broken.
        choices.append(("This flow", [(current, current)]))
    return choices
