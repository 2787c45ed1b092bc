"""TopologySnapshot: an immutable, in-memory view of the topology that the
flow compiler searches. Built with three queries and cached per topology
revision token, so a compile never queries the database per edge and a busy
portal builds the index once per topology change, not once per flow.

It holds the administrators' topology only. Data nodes users make for
themselves (thousands of them) are not in it: making one moves no revision
and rebuilds nothing. A compile that names some adds their edges for itself
(`with_user_nodes`: one query, a handful of edges per executor whose routing
policy serves their kind).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from portal.topology.models import Capability, DataNode, SpecExecutor, TopologyRevision
from portal.topology.validators import user_kinds

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
    # The kinds of user-made nodes it reads as a flow's source / writes as a destination.
    user_sources: frozenset[str] = frozenset()
    user_destinations: frozenset[str] = frozenset()

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
    # executor → the nodes its capabilities read from / write to (a user-made node's edges)
    reads: dict[str, frozenset[str]] = field(default_factory=dict)
    writes: dict[str, frozenset[str]] = field(default_factory=dict)

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
        reads: dict[str, set[str]] = {}
        writes: dict[str, set[str]] = {}
        for executor_name, source, destination in capabilities:
            reads.setdefault(executor_name, set()).add(source)
            writes.setdefault(executor_name, set()).add(destination)
        return cls(
            nodes={n.name: n for n in nodes},
            executors=by_name,
            adjacency=adjacency,
            unusable={key: sorted(names) for key, names in unusable.items()},
            token=token,
            number=number,
            reads={name: frozenset(found) for name, found in reads.items()},
            writes={name: frozenset(found) for name, found in writes.items()},
        )

    @classmethod
    def from_db(cls, token: uuid.UUID | None = None, number: int = 0) -> TopologySnapshot:
        nodes = [
            NodeInfo(name, kind, dict(props or {}))
            for name, kind, props in DataNode.objects.filter(user_made=False).values_list(
                "name", "kind", "properties"
            )
        ]
        executors = [
            ExecutorInfo(  # the fields in ExecutorInfo's order
                *row[:6],
                dict(row[6] or {}),
                *row[7:10],
                frozenset(user_kinds(row[10])),
                frozenset(user_kinds(row[11])),
            )
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
                "user_sources",
                "user_destinations",
            )
        ]
        capabilities = list(
            Capability.objects.values_list("executor__name", "source__name", "destination__name")
        )
        return cls.build(nodes, executors, capabilities, token=token, number=number)

    def edge_count(self) -> int:
        return sum(len(edges) for edges in self.adjacency.values())


def _served(
    snapshot: TopologySnapshot, kind: str, role: str
) -> tuple[dict[str, tuple[int, int, str]], dict[str, list[str]]]:
    """For user-made nodes of `kind` as a flow's `role`: each node at the other end (what the
    serving executors write to, for a source; read from, for a destination) → the best usable
    executor's (cost, health penalty, name), and → the unusable executors that would serve it.
    Worked out once per snapshot and kind, then shared by every compile against it."""
    cache: dict[tuple[str, str], tuple[dict[str, tuple[int, int, str]], dict[str, list[str]]]]
    cache = snapshot.__dict__.setdefault("_served", {})
    found = cache.get((kind, role))
    if found is None:
        best: dict[str, tuple[int, int, str]] = {}
        unusable: dict[str, list[str]] = {}
        for executor in snapshot.executors.values():
            if kind not in (executor.user_sources if role == "source" else executor.user_destinations):
                continue
            ends = (snapshot.writes if role == "source" else snapshot.reads).get(executor.name, frozenset())
            if not executor.usable:
                for end in ends:
                    unusable.setdefault(end, []).append(executor.name)
                continue
            rank = (executor.cost, HEALTH_PENALTY[executor.health_status], executor.name)
            for end in ends:
                if end not in best or rank < best[end]:
                    best[end] = rank
        found = cache[(kind, role)] = (best, {end: sorted(names) for end, names in unusable.items()})
    return found


def _source_edges(snapshot: TopologySnapshot, kind: str) -> list[Edge]:
    """A user-made source's edges into the administrators' nodes, sorted, once per snapshot and kind."""
    cache: dict[str, list[Edge]] = snapshot.__dict__.setdefault("_source_edges", {})
    if kind not in cache:
        best, _unusable = _served(snapshot, kind, "source")
        cache[kind] = [Edge(end, cost, health, name) for end, (cost, health, name) in sorted(best.items())]
    return cache[kind]


def with_user_nodes(snapshot: TopologySnapshot, source: str, destinations: Iterable[str]) -> TopologySnapshot:
    """The snapshot plus the user-made nodes a flow names and their edges, for one compile.

    A user-made source gets an edge to every node an executor serving its kind as a source
    writes to (its capabilities' destinations) and to the flow's user-made destinations that
    executor serves; a user-made destination an edge from every node an executor serving its
    kind as a destination reads from. The best executor per pair is chosen as for capabilities,
    worked out once per snapshot and kind (`_served`). One query, and only when the flow names a
    node the snapshot does not hold; the cached snapshot itself is never changed."""
    destinations = list(destinations)
    missing = [name for name in dict.fromkeys([source, *destinations]) if name and name not in snapshot.nodes]
    if not missing:
        return snapshot
    rows = DataNode.objects.filter(name__in=missing, user_made=True).values_list("name", "kind", "properties")
    found = {name: NodeInfo(name, kind, dict(props or {})) for name, kind, props in rows}
    if not found:
        return snapshot
    user_source = found.get(source)
    user_destinations = [found[name] for name in destinations if name in found and name != source]
    adjacency = dict(snapshot.adjacency)
    unusable = dict(snapshot.unusable)
    if user_source is not None:
        edges = list(_source_edges(snapshot, user_source.kind))
        for end, names in _served(snapshot, user_source.kind, "source")[1].items():
            unusable[(user_source.name, end)] = names
        for node in user_destinations:  # straight from the user's source into their destination
            pairs = [
                (executor.name, user_source.name, node.name)
                for executor in snapshot.executors.values()
                if user_source.kind in executor.user_sources and node.kind in executor.user_destinations
            ]
            direct = TopologySnapshot.build([], list(snapshot.executors.values()), pairs)
            edges += direct.adjacency.get(user_source.name, [])
            unusable.update(direct.unusable)
        adjacency[user_source.name] = edges
    for node in user_destinations:
        best, blocked = _served(snapshot, node.kind, "destination")
        for start, (cost, health, name) in best.items():
            adjacency[start] = [*adjacency.get(start, ()), Edge(node.name, cost, health, name)]
        for start, names in blocked.items():
            unusable[(start, node.name)] = names
    return replace(snapshot, nodes={**snapshot.nodes, **found}, adjacency=adjacency, unusable=unusable)


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
