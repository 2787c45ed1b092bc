"""Who may read from and write to a data node (its grants, `DataNodeGrant`).

The compiler refuses a flow whose owner lacks a grant (read on the source, write on every node the
flow publishes into) and the worker checks it again. Staff may use every node. A node without any
grant follows ``DATA_NODE_DEFAULT_ACCESS``: ``closed`` (the default: staff only until an
administrator grants it) or ``open`` (everyone, until its first grant restricts it).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

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
    made a background recompile run at tens of flows per second (issue #18)."""

    def __init__(self, user: Any) -> None:
        self.user = user
        self._groups: set[int] | None = None
        self._grants: dict[str, list[tuple[str, int | None, int | None]]] = {}

    def may(self, node_name: str, action: str) -> bool:
        """True when the user may ``read`` from / ``write`` to the node."""
        user = self.user
        if user is None or not getattr(user, "is_active", False):
            return False
        if user.is_staff or user.is_superuser:
            return True
        if node_name not in self._grants:
            self._grants[node_name] = list(
                DataNodeGrant.objects.filter(node__name=node_name).values_list("role", "user_id", "group_id")
            )
        grants = self._grants[node_name]
        if not grants:
            return default_open()
        if self._groups is None:
            self._groups = set(user.groups.values_list("id", flat=True))
        return any(
            role in (DataNodeGrant.Role.OWNER, action) and (user_id == user.pk or group_id in self._groups)
            for role, user_id, group_id in grants
        )

    def refusal(self, node_name: str, action: str) -> str | None:
        if self.may(node_name, action):
            return None
        verb = "read from" if action == READ else "write to"
        name = getattr(self.user, "username", None) or "nobody"
        return f"the flow's owner {name!r} may not {verb} data node {node_name!r} (ask its owner for a {action} grant)"


def may_use(user: Any, node_name: str, action: str) -> bool:
    """True when ``user`` may ``read`` from / ``write`` to the node."""
    return NodeAccess(user).may(node_name, action)


def refusal(user: Any, node_name: str, action: str) -> str | None:
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
