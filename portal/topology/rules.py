"""The topology catalog's access rules, registered with the access module
(accounts.access) in TopologyConfig.ready: every signed-in user sees data
nodes, executors and capabilities (a node's page too, so they can ask its
owners for access); staff change them all; the owners of a user-made data
node (an owner grant to them or one of their groups) change and delete it and
its grants. (Who may read from or write to a data node when a flow runs is
topology.grants, the nodes' grants.)"""

from __future__ import annotations

from django.db.models import Q

from portal.accounts import access
from portal.accounts.access import Principal
from portal.topology.models import Capability, DataNode, DataNodeGrant, SpecExecutor


def owned(user: Principal) -> Q:
    """Nodes with an owner grant to the user or one of their groups."""
    owners = DataNodeGrant.objects.filter(
        Q(user=user) | Q(group__in=user.groups.values("id")), role=DataNodeGrant.Role.OWNER
    )
    return Q(pk__in=owners.values("node_id"))


def data_node_rule(user: Principal, action: str) -> Q:
    if action == access.VIEW or user.is_staff or user.is_superuser:
        return Q()
    return Q(user_made=True) & owned(user)


def register() -> None:
    access.register(DataNode, data_node_rule)
    for model in (SpecExecutor, Capability):
        access.register(model, access.staff_only)
