"""Which waiting job goes next when an executor frees a slot: fair between
owners by weight (least served first, a weighted deficit count: the owner with
the fewest jobs in flight per unit of weight; each pick counts against its
owner, so with weights 2 and 1 and both backlogged the picks go 2:1), then,
within an owner and between owners served equally, scheduled runs before
run-now, run-now before backfills and re-runs, higher flow priority first, the
longest waiting first. Pure: orchestration gathers the waiters and the counts."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any

SCHEDULED, ON_DEMAND, CATCH_UP = 0, 1, 2  # trigger classes, first goes first


@dataclass(frozen=True, order=True)
class Waiter:
    # The order within one owner's queue (and between equally served owners).
    trigger_class: int
    neg_priority: int
    since: datetime
    key: Any = field(compare=False)
    owner: Any = field(compare=False)


def waiter(key: Any, owner: Any, *, trigger_class: int, priority: int, since: datetime) -> Waiter:
    return Waiter(trigger_class, -priority, since, key=key, owner=owner)


def fair_order(
    waiters: Iterable[Waiter],
    in_flight: Mapping[Any, int],
    limit: int | None = None,
    weights: Mapping[Any, int] | None = None,
) -> list[Waiter]:
    """The waiters in the order they should be dispatched (the first `limit` of
    it). An owner missing from `weights` weighs 1."""
    queues: dict[Any, list[Waiter]] = {}
    for one in waiters:
        queues.setdefault(one.owner, []).append(one)
    for queue in queues.values():
        queue.sort(reverse=True)  # pop() from the end takes the first
    weight = {owner: max(1, (weights or {}).get(owner, 1)) for owner in queues}
    served = {owner: in_flight.get(owner, 0) for owner in queues}
    # Exact fractions: 2/2 and 1/1 tie, as they should, where floats might not.
    heap = [(Fraction(served[owner], weight[owner]), queue[-1], owner) for owner, queue in queues.items()]
    heapq.heapify(heap)
    order: list[Waiter] = []
    while heap and (limit is None or len(order) < limit):
        _, _, owner = heapq.heappop(heap)
        queue = queues[owner]
        order.append(queue.pop())
        served[owner] += 1
        if queue:
            heapq.heappush(heap, (Fraction(served[owner], weight[owner]), queue[-1], owner))
    return order
