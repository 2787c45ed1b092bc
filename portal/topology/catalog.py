"""The data nodes as a list, one page at a time: those a user may use, and those they may ask for.

A node a user holds no grant on used to be listed nowhere, so its Request access button was
reachable only by a link someone shared. The ask list names each such node — its name, kind,
owners (or "administrators") and description, never its connection properties — so a user can
find a source and ask for it. The portal may hold thousands of user-made nodes: each page reads
`per_page + 1` rows (the extra one says whether there is a next page; nothing is counted), then
the owners and the user's open requests of those rows alone, three queries in all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Q, QuerySet

from portal.accounts.access import Principal, is_account
from portal.topology import grants
from portal.topology.models import DataNode, DataNodeAccessRequest, DataNodeGrant

PER_PAGE = 25


@dataclass(frozen=True)
class ListedNode:
    node: DataNode
    owners: list[str]  # "alice", "group sales"; empty: the administrators answer for it
    pending: list[str] = field(default_factory=list)  # roles the user asked for and waits for


@dataclass(frozen=True)
class NodePage:
    rows: list[ListedNode]
    number: int
    has_next: bool
    query: str

    @property
    def has_previous(self) -> bool:
        return self.number > 1


def askable(user: Principal) -> QuerySet[DataNode]:
    """The nodes `user` may ask for: every node they may not use (none, for staff)."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return DataNode.objects.none()
    if user.is_staff or user.is_superuser:
        return DataNode.objects.none()
    return DataNode.objects.exclude(grants.usable_filter(user))


def usable(user: Principal) -> QuerySet[DataNode]:
    """The nodes `user` may use: staff see the administrators' nodes and those granted to them
    (every user's would be thousands)."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return DataNode.objects.none()
    if user.is_staff or user.is_superuser:
        return DataNode.objects.filter(Q(user_made=False) | grants.granted_to(user))
    return DataNode.objects.filter(grants.usable_filter(user))


def page_number(raw: str | None) -> int:
    """A page number from the query string; anything else is the first page."""
    try:
        number = int(raw or 1)
    except ValueError:
        return 1
    return min(max(number, 1), 10_000)


def page_of(
    nodes: QuerySet[DataNode], user: Principal, *, number: int = 1, query: str = "", per_page: int = PER_PAGE
) -> NodePage:
    """One page of `nodes`, by name, those whose name or description holds `query`."""
    query = query.strip()[:100]
    if query:
        nodes = nodes.filter(Q(name__icontains=query) | Q(description__icontains=query))
    start = (number - 1) * per_page
    found = list(
        nodes.order_by("name").only("name", "kind", "description", "user_made")[start : start + per_page + 1]
    )
    shown = found[:per_page]
    ids = [node.pk for node in shown]
    owners: dict[int, list[str]] = {pk: [] for pk in ids}
    for node_id, username, group in DataNodeGrant.objects.filter(
        node_id__in=ids, role=DataNodeGrant.Role.OWNER
    ).values_list("node_id", "user__username", "group__name"):
        owners[node_id].append(username or f"group {group}")
    pending: dict[int, list[str]] = {pk: [] for pk in ids}
    if is_account(user) and user.pk:
        for node_id, role in DataNodeAccessRequest.objects.filter(
            node_id__in=ids, requested_by=user, decided_at__isnull=True
        ).values_list("node_id", "role"):
            pending[node_id].append(role)
    rows = [ListedNode(node, sorted(owners[node.pk]), sorted(pending[node.pk])) for node in shown]
    return NodePage(rows=rows, number=number, has_next=len(found) > per_page, query=query)
