"""Path search over capability edges: for each destination, the cheapest
path from the source, ranked lexicographically by (hops, executor cost,
executor health penalty, executor/node names).

Gobblin's breadth-first search took the first executor that worked; here a
Dijkstra over the cost tuple picks the best one and breaks ties the same way
on every run. All destinations come out of one search as a shortest-path
tree, so a prefix shared by several destinations is one set of hops.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from portal.topology.graph import Edge, TopologySnapshot, reverse_reachable


@dataclass(frozen=True)
class Hop:
    source: str
    destination: str
    executor: str
    index: int  # 1 for the first hop out of the flow's source


@dataclass
class SearchResult:
    paths: dict[str, list[Hop]]  # reachable destination → hops, in order
    pending: dict[str, str]  # unreachable destination → short reason


def search(snapshot: TopologySnapshot, source: str, destinations: list[str]) -> SearchResult:  # noqa: C901
    if source not in snapshot.nodes:
        reason = f"source {source!r} is not a data node in the topology"
        return SearchResult({}, {d: f"{source} → {d}: {reason}" for d in destinations})
    parent: dict[str, tuple[str, Edge]] = {}
    best: dict[str, tuple] = {source: (0, 0, 0, ())}
    heap: list[tuple] = [(0, 0, 0, (), source)]
    settled: dict[str, int] = {}  # node → hops
    remaining = {d for d in destinations if d in snapshot.nodes}
    adjacency = snapshot.adjacency
    while heap and remaining:
        hops, cost, health, key, node = heapq.heappop(heap)
        if node in settled:
            continue
        settled[node] = hops
        remaining.discard(node)
        for edge in adjacency.get(node, ()):
            target = edge.destination
            if target in settled:
                continue
            candidate = (hops + 1, cost + edge.cost, health + edge.health, (*key, edge.executor, target))
            old = best.get(target)
            if old is None or candidate < old:
                best[target] = candidate
                parent[target] = (node, edge)
                heapq.heappush(heap, (*candidate, target))

    paths: dict[str, list[Hop]] = {}
    pending: dict[str, str] = {}
    for destination in destinations:
        if destination == source:
            pending[destination] = f"{source} → {destination}: the destination is the source"
        elif destination not in snapshot.nodes:
            pending[destination] = (
                f"{source} → {destination}: destination {destination!r} is not a data node in the topology"
            )
        elif destination in settled:
            paths[destination] = _walk_back(parent, destination, settled)
        else:
            pending[destination] = explain(snapshot, source, destination, settled)
    return SearchResult(paths, pending)


def _walk_back(parent: dict[str, tuple[str, Edge]], destination: str, settled: dict[str, int]) -> list[Hop]:
    hops: list[Hop] = []
    node = destination
    while node in parent:
        previous, edge = parent[node]
        hops.append(Hop(previous, node, edge.executor, settled[node]))
        node = previous
    hops.reverse()
    return hops


def _names(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return f"{shown} +{len(names) - limit} more" if len(names) > limit else shown


def explain(snapshot: TopologySnapshot, source: str, destination: str, settled: dict[str, int]) -> str:
    """One short reason naming the missing hop, not every edge's missing keys.

    The search ran to exhaustion, so `settled` is everything reachable from
    the source; nodes that reach the destination come from a reverse walk.
    """
    prefix = f"{source} → {destination}: "
    into = reverse_reachable(snapshot, destination)
    into_set = set(into)
    blocked = sorted(
        (u, v, names) for (u, v), names in snapshot.unusable.items() if u in settled and v in into_set
    )
    if blocked:
        u, v, names = blocked[0]
        states = ", ".join(f"{n} is {snapshot.executors[n].why_unusable}" for n in names)
        return prefix + f"missing hop {u} → {v} ({states})"
    if len(settled) == 1:
        return prefix + f"missing hop out of {source} (no enabled executor reads from it)"
    if len(into) == 1:
        reached = sorted(settled, key=lambda n: (-settled[n], n))
        return (
            prefix
            + f"missing hop into {destination} (no enabled executor writes to it; reachable: {_names(reached)})"
        )
    reached = sorted(settled, key=lambda n: (-settled[n], n))
    return prefix + f"missing hop from one of [{_names(reached)}] to one of [{_names(into[1:])}]"
