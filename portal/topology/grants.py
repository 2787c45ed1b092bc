"""Who may read from and write to a data node (its grants, `DataNodeGrant`).

The compiler refuses a flow whose owner lacks a grant (read on the source, write on every node the
flow publishes into) and the worker checks it again. Staff may use every node. An administrator's
node without any grant follows ``DATA_NODE_DEFAULT_ACCESS``: ``closed`` (the default: staff only
until an administrator grants it) or ``open`` (everyone, until its first grant restricts it). A
user-made node is never open: without grants (its owning group deleted) only staff use it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet

from portal.accounts.access import Principal
from portal.accounts.grants import parse_principal_grants
from portal.topology.models import DataNode, DataNodeGrant

READ, WRITE = "read", "write"
ROLES = {choice for choice, _label in DataNodeGrant.Role.choices}


def default_open() -> bool:
    return getattr(settings, "DATA_NODE_DEFAULT_ACCESS", "closed") == "open"


class NodeAccess:
    """One user's data-node access, read once: the user's groups on first use and each node's
    grants on first check of that node. A recompile batch compiles hundreds of flows of one
    owner against a handful of nodes; checking grants with fresh queries per flow and node
    made a background recompile run at tens of flows per second."""

    def __init__(self, user: Principal) -> None:
        self.user = user
        self._groups: set[int] | None = None
        # node name → (user-made, [(role, user id, group id)]); one query per node, grants joined
        self._grants: dict[str, tuple[bool, list[tuple[str, int | None, int | None]]]] = {}

    def may(self, node_name: str, action: str) -> bool:
        """True when the user may ``read`` from / ``write`` to the node."""
        user = self.user
        if user is None or not getattr(user, "is_active", False):
            return False
        if user.is_staff or user.is_superuser:
            return True
        if node_name not in self._grants:
            rows = DataNode.objects.filter(name=node_name).values_list(
                "user_made", "grants__role", "grants__user_id", "grants__group_id"
            )
            made = any(row[0] for row in rows)
            self._grants[node_name] = (made, [row[1:] for row in rows if row[1] is not None])
        user_made, grants = self._grants[node_name]
        if not grants:
            return default_open() and not user_made
        if self._groups is None:
            self._groups = set(user.groups.values_list("id", flat=True))
        return any(
            role in (DataNodeGrant.Role.OWNER, action) and (user_id == user.pk or group_id in self._groups)
            for role, user_id, group_id in grants
        )

    def refusal(self, node_name: str, action: str) -> str | None:
        """Why the user may not, naming whom to ask and where (the node's page, whose
        Request access button asks them): the flow form links that page."""
        if self.may(node_name, action):
            return None
        verb = "read from" if action == READ else "write to"
        name = getattr(self.user, "username", None) or "nobody"
        who = ", ".join(owner_names(node_name)) or "an administrator"
        return (
            f"the flow's owner {name!r} may not {verb} data node {node_name!r} (ask its owners for a "
            f"{action} grant: {who}; Request access on {node_page(node_name)})"
        )


def node_page(node_name: str) -> str:
    """The node's page, where its owners are named and access is requested."""
    return f"/topology/datanodes/{node_name}/"


def owner_names(node_name: str) -> list[str]:
    """Whom to ask: the node's owners as people write them (`alice`, `group sales`)."""
    rows = DataNodeGrant.objects.filter(node__name=node_name, role=DataNodeGrant.Role.OWNER).values_list(
        "user__username", "group__name"
    )
    return sorted(user or f"group {group}" for user, group in rows)


def granted_to(user: Principal, roles: list[str] | None = None) -> Q:
    """Nodes with a grant (in `roles`; any by default) to the user or one of their groups (a
    subquery, no join)."""
    principal = Q(user=user) | Q(group__in=user.groups.values("id"))
    return Q(pk__in=DataNodeGrant.objects.filter(principal, role__in=roles or list(ROLES)).values("node_id"))


def usable_nodes(user: Principal, action: str) -> QuerySet[DataNode]:
    """The nodes the user may ``read`` from / ``write`` to, as the flow form offers them: their
    grants, the administrators' nodes without grants when those are open, and for staff every
    administrator's node and the user-made ones granted to them (staff may use any node, but the
    form does not list every user's). Nobody signed in: the administrators' nodes."""
    nodes = DataNode.objects.all()
    if user is None or not getattr(user, "is_authenticated", False):
        return nodes.filter(user_made=False)
    if not user.is_active:
        return nodes.none()
    offered = granted_to(user, [DataNodeGrant.Role.OWNER, action])
    if user.is_staff or user.is_superuser:
        offered |= Q(user_made=False)
    elif default_open():
        offered |= Q(user_made=False) & ~Q(pk__in=DataNodeGrant.objects.values("node_id"))
    return nodes.filter(offered)


def usable_filter(user: Principal) -> Q:
    """The nodes a signed-in, active `user` may read from or write to, as one filter: what
    `NodeAccess.may` answers node by node (for read or for write), for a list to page through.
    Staff may use every node."""
    if user.is_staff or user.is_superuser:
        return Q()
    usable = granted_to(user)
    if default_open():
        usable |= Q(user_made=False) & ~Q(pk__in=DataNodeGrant.objects.values("node_id"))
    return usable


def listed_nodes(user: Principal) -> QuerySet[DataNode]:
    """The nodes a list shows the user: the administrators' and the user-made ones they hold a
    grant on (every user's, to staff). Any node's page opens by name, for Request access."""
    nodes = DataNode.objects.all()
    if user is not None and getattr(user, "is_authenticated", False) and (user.is_staff or user.is_superuser):
        return nodes
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return nodes.filter(user_made=False)
    return nodes.filter(Q(user_made=False) | granted_to(user))


def may_use(user: Principal, node_name: str, action: str) -> bool:
    """True when ``user`` may ``read`` from / ``write`` to the node."""
    return NodeAccess(user).may(node_name, action)


def refusal(user: Principal, node_name: str, action: str) -> str | None:
    return NodeAccess(user).refusal(node_name, action)


def grant_entries(node: DataNode) -> list[dict[str, str]]:
    entries = []
    for grant in node.grants.select_related("user", "group"):
        if grant.user is not None:
            entries.append({"role": grant.role, "user": grant.user.username})
        elif grant.group is not None:
            entries.append({"role": grant.role, "group": grant.group.name})
    return sorted(entries, key=lambda e: (e["role"], e.get("user") or "", e.get("group") or ""))


def parse_grants(entries: Any) -> list[DataNodeGrant]:
    """Validated, unsaved rows; ValidationError({"acl": [...]}) naming each bad entry."""
    return parse_principal_grants(entries, DataNodeGrant, roles=ROLES, field="acl")


def set_grants(node: DataNode, entries: Any) -> None:
    """Replace the node's grants (validated whole, one transaction)."""
    unique = parse_grants(entries)
    with transaction.atomic():
        node.grants.all().delete()
        for row in unique:
            row.node = node
        DataNodeGrant.objects.bulk_create(unique)
