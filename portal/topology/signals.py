"""Topology catalog events, GaaS's TopologyCatalogListener: one Django
signal, the same mechanism as `flows.signals`.

Sent by `topology.services` inside the saving transaction with `action`
("add", "update", "delete"), `kind` ("executor", "datanode", "capability")
and `instance`. Receivers (the compiler's recompile, the scheduler's retry of
pending flows) commit or roll back with the change.
"""

from django.dispatch import Signal

topology_catalog_changed = Signal()

# A user-made data node changed without moving the revision (its connection, its grants): sent
# inside the change's transaction with `node` (the DataNode) and `action` ("update", "grants").
# The flows over it are recompiled (portal.flows.compiler.usernodes), no other.
user_node_changed = Signal()

# Which flows name a data node (as source or destination, or route through it): sent with
# `node_name`; each receiver returns a list of "flowGroup/flowName". The flows app answers
# (portal.flows.compiler.usernodes), the node's page lists them and deleting a user-made node
# refuses while there are any.
data_node_usage = Signal()

# The routing of user-made nodes of some kinds may have changed: an executor serving them
# appeared, went, changed its policy, its cost or its health. Sent inside the change's
# transaction with `kinds`; the flows over user-made nodes of those kinds are recompiled (the
# refresh planner sees only the administrators' topology).
user_routing_changed = Signal()

# How many flows are routed through an executor (a hop of their stored DAG runs on it): sent with
# `executor_name`; each receiver returns a count. The flows app answers with one COUNT query
# (portal.flows.compiler.usernodes); the executor's disable confirmation says it before asking.
executor_usage = Signal()

# The flows a user may see that publish into a data node (each into its own folder,
# `<flowGroup>/<flowName>` under a files node's root): sent with `user` and `node_name`; each
# receiver returns a list of (flowGroup, flowName). The flows app answers
# (portal.flows.compiler.usernodes); the source picker offers their outputs, so a flow chains on
# another without a second node.
upstream_flows = Signal()
