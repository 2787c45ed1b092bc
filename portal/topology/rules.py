"""The topology catalog's access rule, registered with the access module
(accounts.access) in TopologyConfig.ready: every signed-in user sees data
nodes, executors and capabilities; staff change them. (Who may read from or
write to a data node when a flow runs is topology.access, the nodes' grants.)"""

from __future__ import annotations

from portal.accounts import access
from portal.topology.models import Capability, DataNode, SpecExecutor


def register() -> None:
    for model in (DataNode, SpecExecutor, Capability):
        access.register(model, access.staff_only)
