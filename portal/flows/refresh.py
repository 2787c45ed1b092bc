"""Background recompiles after a topology change (docs/topology.md).

A topology change only moves the revision (token and number) inside its
transaction, so it commits in milliseconds whatever the catalog holds. The
scheduler's loop then, after the commit:

1. **plans** (`plan_refresh`, one process at a time): diffs the routing-relevant
   topology against the `RouteSummary` of the last planned revision and
   queues a `FlowRefresh` row for each flow the difference can affect:
   * flows routed over an edge whose best executor got worse or went away,
     over a changed executor (its queue, master, … are in the job specs) or
     through a changed data node (its connection properties are too);
   * flows that could use an edge that got better or appeared: the source
     reaches the edge's start and the edge's end reaches a destination (a flow
     already on that edge with the same executor keeps its route);
   * flows not compiled (pending, failed) whose source reaches a changed
     edge or that a changed edge leads to a destination of, or that name an
     added or removed data node: their reasons name missing hops and the
     nodes reachable on either side.
   A health flip that changes no best edge queues nothing.
2. **recompiles** (`refresh_batch`, any number of processes): claims a batch of
   rows (SKIP LOCKED), locks those flows, compiles them against the current
   snapshot and stores only what changed, never over a newer revision's
   verdict (`record_batch`).
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Q

from portal.bulk import any_of
from portal.flows.compiler.record import record_batch
from portal.flows.models import CompiledHop, FlowConfig, FlowRefresh, RouteSummary
from portal.topology.graph import TopologySnapshot, current_snapshot
from portal.topology.services import current_revision_number

logger = logging.getLogger(__name__)

BATCH_SIZE = 500
# Above this many changed edges (a whole topology file synced at once) the
# per-edge reachability test is replaced by one over all of them together.
PER_EDGE_LIMIT = 64
SEP = "\t"


# --- the routing summary ---------------------------------------------------------


def summarize(snapshot: TopologySnapshot) -> dict[str, Any]:
    """What of the topology a compiled flow depends on, as JSON."""
    return {
        "edges": {
            f"{source}{SEP}{edge.destination}": [edge.executor, edge.cost, edge.health]
            for source, edges in snapshot.adjacency.items()
            for edge in edges
        },
        "unusable": {
            f"{u}{SEP}{v}": [f"{name}:{snapshot.executors[name].why_unusable}" for name in names]
            for (u, v), names in snapshot.unusable.items()
        },
        "executors": {
            e.name: json.dumps(
                [e.uri, e.technology, e.location, e.queue, e.spark_master, e.spark_conf], sort_keys=True
            )
            for e in snapshot.executors.values()
        },
        "nodes": {
            n.name: json.dumps([n.kind, n.properties], sort_keys=True) for n in snapshot.nodes.values()
        },
    }


def _pair(key: str) -> tuple[str, str]:
    u, v = key.split(SEP)
    return u, v


def _adjacency(edges: dict[str, Any]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    forward: dict[str, set[str]] = {}
    backward: dict[str, set[str]] = {}
    for key in edges:
        u, v = _pair(key)
        forward.setdefault(u, set()).add(v)
        backward.setdefault(v, set()).add(u)
    return forward, backward


def _reach(graph: dict[str, set[str]], starts: Iterable[str]) -> set[str]:
    seen = set(starts)
    queue = deque(seen)
    while queue:
        for nxt in graph.get(queue.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def _rank(edge: list[Any]) -> tuple[int, int, str]:
    executor, cost, health = edge
    return (cost, health, executor)


def affected_flows(old: dict[str, Any], new: dict[str, Any]) -> set[int]:  # noqa: C901
    """Ids of the flows whose verdict the change from `old` to `new` can alter."""
    old_edges, new_edges = old.get("edges", {}), new.get("edges", {})
    worse: list[tuple[str, str, str]] = []  # (u, v, old executor)
    better: list[tuple[str, str, str | None]] = []  # (u, v, executor kept or None)
    for key in old_edges.keys() | new_edges.keys():
        before, after = old_edges.get(key), new_edges.get(key)
        if before == after:
            continue
        u, v = _pair(key)
        if before is not None and (after is None or _rank(after) > _rank(before) or after[0] != before[0]):
            worse.append((u, v, before[0]))
        if after is not None and (before is None or _rank(after) < _rank(before)):
            better.append((u, v, after[0] if before is not None and after[0] == before[0] else None))
    old_unusable, new_unusable = old.get("unusable", {}), new.get("unusable", {})
    unusable_changed = [
        _pair(key)
        for key in old_unusable.keys() | new_unusable.keys()
        if old_unusable.get(key) != new_unusable.get(key)
    ]
    old_exec, new_exec = old.get("executors", {}), new.get("executors", {})
    executors = [
        name for name in old_exec.keys() | new_exec.keys() if old_exec.get(name) != new_exec.get(name)
    ]
    old_nodes, new_nodes = old.get("nodes", {}), new.get("nodes", {})
    nodes = [
        name for name in old_nodes.keys() | new_nodes.keys() if old_nodes.get(name) != new_nodes.get(name)
    ]
    appeared = {name for name in old_nodes.keys() ^ new_nodes.keys()}

    affected: set[int] = set()
    # 1. Flows routed over what changed.
    hop_filter = Q()
    for u, v, _executor in worse:
        hop_filter |= Q(source=u, destination=v)
    if executors:
        hop_filter |= Q(executor__in=executors)
    if nodes:
        hop_filter |= Q(source__in=nodes) | Q(destination__in=nodes)
    if hop_filter:
        affected.update(CompiledHop.objects.filter(hop_filter).values_list("flow_id", flat=True).distinct())

    # 2. Flows that could use an edge that got better.
    if better:
        forward, backward = _adjacency(new_edges)
        groups = (
            [[edge] for edge in better]
            if len(better) <= PER_EDGE_LIMIT
            else [better]  # one over-approximation for a large batch of changes
        )
        for group in groups:
            sources = _reach(backward, (u for u, _v, _e in group))
            targets = _reach(forward, (v for _u, v, _e in group))
            keep: set[int] = set()
            if len(group) == 1 and group[0][2] is not None:
                u, v, executor = group[0]
                keep = set(
                    CompiledHop.objects.filter(source=u, destination=v, executor=executor).values_list(
                        "flow_id", flat=True
                    )
                )
            for pk, destinations in FlowConfig.objects.filter(source__in=sources).values_list(
                "pk", "destinations"
            ):
                if pk not in keep and targets.intersection(destinations or ()):
                    affected.add(pk)

    # 3. Flows not compiled: their reasons name missing hops and reachable nodes.
    changed_pairs = [(u, v) for u, v, _e in worse] + [(u, v) for u, v, _e in better] + unusable_changed
    if changed_pairs or appeared:
        fwd_old, back_old = _adjacency(old_edges)
        fwd_new, back_new = _adjacency(new_edges)
        starts = {u for u, _v in changed_pairs}
        ends = {v for _u, v in changed_pairs}
        sources = _reach(back_old, starts) | _reach(back_new, starts) | appeared
        targets = _reach(fwd_old, ends) | _reach(fwd_new, ends) | appeared
        waiting = FlowConfig.objects.exclude(compilation_status=FlowConfig.Compilation.COMPILED)
        for pk, source, destinations in waiting.values_list("pk", "source", "destinations"):
            if source in sources or targets.intersection(destinations or ()):
                affected.add(pk)
    return affected


# --- plan and recompile ------------------------------------------------------------


def _queue(flow_ids: Iterable[int], revision: int) -> None:
    ids = sorted(flow_ids)
    for first in range(0, len(ids), 1000):
        owners = FlowConfig.objects.filter(pk__in=any_of(ids[first : first + 1000])).values_list(
            "pk", "owner_id"
        )
        FlowRefresh.objects.bulk_create(
            [FlowRefresh(flow_id=pk, revision=revision, owner_key=owner) for pk, owner in owners],
            update_conflicts=True,
            unique_fields=["flow"],
            update_fields=["revision", "requested", "owner_key"],
        )


def plan_refresh() -> int | None:
    """Queue the flows the topology changes since the last plan can affect.
    Returns how many were queued, or None when there was nothing to plan
    (or another process is planning)."""

    if RouteSummary.objects.filter(pk=1, applied_revision__gte=current_revision_number()).exists():
        return None
    RouteSummary.objects.get_or_create(pk=1)
    with transaction.atomic():
        summary = RouteSummary.objects.select_for_update(skip_locked=True).filter(pk=1).first()
        if summary is None:
            return None  # another scheduler is planning
        snapshot = current_snapshot()
        if summary.applied_revision >= snapshot.number:
            return None
        routes = summarize(snapshot)
        affected = affected_flows(summary.routes or {}, routes)
        _queue(affected, snapshot.number)
        summary.applied_revision, summary.routes = snapshot.number, routes
        summary.save(update_fields=["applied_revision", "routes", "updated"])
    logger.info("topology revision %d: %d flow(s) to recompile", snapshot.number, len(affected))
    return len(affected)


def refresh_batch(limit: int = BATCH_SIZE) -> int:
    """Recompile one batch of queued flows; returns how many were claimed."""

    with transaction.atomic():
        # By owner: a batch then reads each owner's template access once.
        claimed = list(
            FlowRefresh.objects.select_for_update(skip_locked=True, of=("self",))
            .order_by("owner_key", "flow_id")
            .values_list("flow_id", flat=True)[:limit]
        )
        if not claimed:
            return 0
        # Locked, so a user's concurrent save of one of them waits (or is
        # waited for) and the newest definition is the one compiled.
        flows = list(
            FlowConfig.objects.select_for_update(of=("self",))
            .select_related("owner")
            .filter(pk__in=any_of(claimed))
            .order_by("pk")
        )
        snapshot = current_snapshot()
        counts = record_batch(flows, snapshot)
        FlowRefresh.objects.filter(flow_id__in=any_of(claimed), revision__lte=snapshot.number).delete()
    logger.debug("recompiled %d flow(s) at revision %d: %s", len(claimed), snapshot.number, counts)
    return len(claimed)


def refresh_compilations(budget_seconds: float = 1.0) -> int:
    """One pass of the scheduler loop: plan, then recompile batches for at
    most about `budget_seconds`, so cron ticks and actions are not starved."""
    plan_refresh()
    deadline = time.monotonic() + budget_seconds
    done = 0
    while claimed := refresh_batch():  # at least one batch, whatever the budget: no starving
        done += claimed
        if time.monotonic() >= deadline:
            break
    return done


def drain() -> int:
    """Plan and recompile until nothing is queued (tests, `manage.py` tools)."""
    done = 0
    plan_refresh()
    while claimed := refresh_batch():
        done += claimed
    return done


def is_refreshing(flow: FlowConfig) -> bool:
    """True while a topology change's recompile of this flow is queued or
    not planned yet (the pages say its verdict is being refreshed)."""

    if FlowRefresh.objects.filter(flow=flow).exists():
        return True
    applied = RouteSummary.objects.filter(pk=1).values_list("applied_revision", flat=True).first() or 0
    return applied < current_revision_number()
