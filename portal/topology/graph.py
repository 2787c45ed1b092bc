"""TopologySnapshot: an immutable, in-memory view of the topology that the
flow compiler searches. Built with three queries and cached per topology
revision token, so a compile never queries the database per edge and a busy
portal builds the index once per topology change, not once per flow.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field

from portal.topology.models import Capability, DataNode, SpecExecutor, TopologyRevision

# Health penalty, the third ranking key after hops and cost. UNHEALTHY
# executors are not routed through at all. BUSY (every job thread running a
# live job) is no fault: it ranks as HEALTHY, so a busy flip moves no route.
HEALTH_PENALTY = {"HEALTHY": 0, "BUSY": 0, "UNKNOWN": 1, "DEGRADED": 2}


@dataclass(frozen=True)
class NodeInfo:
    name: str
    kind: str
    properties: dict[str, str]


@dataclass(frozen=True)
class ExecutorInfo:
    name: str
    uri: str
    technology: str
    location: str
    queue: str
    spark_master: str
    spark_conf: dict[str, str]
    cost: int
    enabled: bool
    health_status: str

    @property
    def usable(self) -> bool:
        return self.enabled and self.health_status in HEALTH_PENALTY

    @property
    def why_unusable(self) -> str:
        return "disabled" if not self.enabled else f"health {self.health_status.lower()}"


@dataclass(frozen=True)
class Edge:
    """The best usable executor for one (source, destination) pair."""

    destination: str
    cost: int
    health: int
    executor: str


@dataclass
class TopologySnapshot:
    nodes: dict[str, NodeInfo]
    executors: dict[str, ExecutorInfo]
    # source → edges, one per destination (best executor already chosen),
    # sorted by destination name so the search is deterministic.
    adjacency: dict[str, list[Edge]]
    # (source, destination) → executors that could do it but are not usable;
    # only read to explain why a flow is pending.
    unusable: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    token: uuid.UUID | None = None
    number: int = 0  # TopologyRevision.number: orders snapshots

    @classmethod
    def build(
        cls,
        nodes: list[NodeInfo],
        executors: list[ExecutorInfo],
        capabilities: list[tuple[str, str, str]],
        token: uuid.UUID | None = None,
        number: int = 0,
    ) -> TopologySnapshot:
        """From plain rows: capabilities are (executor, source, destination) names."""
        by_name = {e.name: e for e in executors}
        best: dict[tuple[str, str], tuple[int, int, str]] = {}
        unusable: dict[tuple[str, str], list[str]] = {}
        for executor_name, source, destination in capabilities:
            executor = by_name[executor_name]
            key = (source, destination)
            if not executor.usable:
                unusable.setdefault(key, []).append(executor_name)
                continue
            rank = (executor.cost, HEALTH_PENALTY[executor.health_status], executor_name)
            if key not in best or rank < best[key]:
                best[key] = rank
        adjacency: dict[str, list[Edge]] = {}
        for (source, destination), (cost, health, executor_name) in best.items():
            adjacency.setdefault(source, []).append(Edge(destination, cost, health, executor_name))
        for edges in adjacency.values():
            edges.sort(key=lambda edge: edge.destination)
        return cls(
            nodes={n.name: n for n in nodes},
            executors=by_name,
            adjacency=adjacency,
            unusable={key: sorted(names) for key, names in unusable.items()},
            token=token,
            number=number,
        )

    @classmethod
    def from_db(cls, token: uuid.UUID | None = None, number: int = 0) -> TopologySnapshot:
        nodes = [
            NodeInfo(name, kind, dict(props or {}))
            for name, kind, props in DataNode.objects.values_list("name", "kind", "properties")
        ]
        executors = [
            ExecutorInfo(*row[:6], dict(row[6] or {}), *row[7:])  # the fields in ExecutorInfo's order
            for row in SpecExecutor.objects.values_list(
                "name",
                "uri",
                "technology",
                "location",
                "queue",
                "spark_master",
                "spark_conf",
                "cost",
                "enabled",
                "health_status",
            )
        ]
        capabilities = list(
            Capability.objects.values_list("executor__name", "source__name", "destination__name")
        )
        return cls.build(nodes, executors, capabilities, token=token, number=number)

    def edge_count(self) -> int:
        return sum(len(edges) for edges in self.adjacency.values())


_cache_lock = threading.Lock()
_cache: dict[str, TopologySnapshot] = {}


def current_snapshot() -> TopologySnapshot:
    """The topology as committed (or as changed in the current transaction).

    One query reads the revision token; the index is rebuilt only when it moved.
    """

    row = TopologyRevision.objects.filter(pk=1).values_list("token", "number").first()
    if row is None:
        return TopologySnapshot.from_db()
    token, number = row
    with _cache_lock:
        cached = _cache.get("snapshot")
    if cached is not None and cached.token == token:
        return cached
    snapshot = TopologySnapshot.from_db(token, number)
    with _cache_lock:
        _cache["snapshot"] = snapshot
    return snapshot


def reverse_reachable(snapshot: TopologySnapshot, target: str) -> list[str]:
    """Nodes from which `target` can be reached over usable edges, nearest
    first (target itself first); only used to explain a pending flow."""
    reverse = snapshot.__dict__.get("_reverse")
    if reverse is None:
        reverse = {}
        for source, edges in snapshot.adjacency.items():
            for edge in edges:
                reverse.setdefault(edge.destination, []).append(source)
        for sources in reverse.values():
            sources.sort()
        snapshot.__dict__["_reverse"] = reverse
    order, seen = [target], {target}
    for node in order:
        for source in reverse.get(node, ()):
            if source not in seen:
                seen.add(source)
                order.append(source)
    return order
