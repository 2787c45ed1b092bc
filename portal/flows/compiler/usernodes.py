"""The flows over a data node, for the topology app below (its signals, connected when
compiler.record is imported at start-up):

* `data_node_usage` — which flows name a node (source, destination, or a hop through it): its
  page lists them, and a user-made node is not deleted while there are any;
* `user_node_changed` — a user-made node's connection or grants changed. Such a change moves no
  topology revision (user-made nodes are not in the snapshot), so the refresh planner would not
  see it: the flows over that node alone are queued for the background recompile
  (`FlowRefresh`, portal.flows.refresh), and no other flow is touched;
* `user_routing_changed` — an executor serving user-made nodes of some kinds appeared, went or
  changed its policy, cost or health: the flows over user-made nodes of those kinds are queued;
* `upstream_flows` — the flows a user may see that publish into a node: the source picker offers
  their outputs;
* `executor_usage` — how many flows are routed through an executor: its disable confirmation
  says so before the change recompiles them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from django.dispatch import receiver

from portal.accounts.access import VIEW, Principal
from portal.bulk import any_of
from portal.flows.models import CompiledHop, FlowConfig, FlowRefresh
from portal.topology.models import DataNode
from portal.topology.services import current_revision_number
from portal.topology.signals import (
    data_node_usage,
    executor_usage,
    upstream_flows,
    user_node_changed,
    user_routing_changed,
)


def flows_over(names: Sequence[str]) -> QuerySet[FlowConfig]:
    """The flows whose source or destinations name one of `names`, or that are routed through
    one. Each is an index read of its own (the source, the hop index both ways, the destination
    lists' GIN index), their ids joined here: one query OR-ing them across tables reads the
    whole catalog, and runs inside every executor change (a SpecExecutor serves user kinds)."""
    names = list(names)
    flows = FlowConfig.objects.order_by()  # ids only: no sort
    ids = set(flows.filter(source__in=names).values_list("pk", flat=True))
    hops = CompiledHop.objects.filter(Q(source__in=names) | Q(destination__in=names))
    ids.update(hops.values_list("flow_id", flat=True))
    if connection.features.supports_json_field_contains:
        destined = Q()
        for name in names:
            destined |= Q(destinations__contains=[name])
        ids.update(flows.filter(destined).values_list("pk", flat=True))
    else:  # the embedded portal (SQLite has no JSON containment), a small catalog: read the lists
        wanted = set(names)
        rest = flows.exclude(pk__in=ids).values_list("pk", "destinations")
        ids.update(pk for pk, destinations in rest if wanted & set(destinations or ()))
    return FlowConfig.objects.filter(pk__in=any_of(sorted(ids)))


def flows_naming(node_name: str) -> QuerySet[FlowConfig]:
    """The flows whose source or destinations name the node, or that are routed through it."""
    return flows_over([node_name]).order_by("flow_group", "flow_name")


@receiver(data_node_usage, dispatch_uid="flows.data_node_usage")
def usage(sender: Any, node_name: str, limit: int = 50, **kwargs: Any) -> tuple[list[str], int]:
    """The first `limit` flows naming the node ("flowGroup/flowName") and how many there are."""
    flows = flows_naming(node_name)
    shown = [f"{group}/{name}" for group, name in flows.values_list("flow_group", "flow_name")[:limit]]
    return shown, len(shown) if len(shown) < limit else flows.count()


UPSTREAM_LIMIT = 50


@receiver(upstream_flows, dispatch_uid="flows.upstream_flows")
def publishing_into(sender: Any, user: Principal, node_name: str, **kwargs: Any) -> list[tuple[str, str]]:
    """The flows `user` may VIEW that publish into the node (a destination of theirs, or a hop's),
    by group and name, at most `UPSTREAM_LIMIT`: only those a user may see are offered."""
    hops = CompiledHop.objects.filter(destination=node_name).values_list("flow_id", flat=True)
    if connection.features.supports_json_field_contains:
        destined = Q(destinations__contains=[node_name])
    else:  # the embedded portal: read the lists of the flows this user may see
        rows = FlowConfig.objects.restrict(user, VIEW).values_list("pk", "destinations")
        destined = Q(pk__in=[pk for pk, destinations in rows if node_name in (destinations or ())])
    flows = FlowConfig.objects.restrict(user, VIEW).filter(destined | Q(pk__in=hops))
    return list(
        flows.order_by("flow_group", "flow_name").values_list("flow_group", "flow_name")[:UPSTREAM_LIMIT]
    )


@receiver(executor_usage, dispatch_uid="flows.executor_usage")
def executor_flows(sender: Any, executor_name: str, **kwargs: Any) -> int:
    """Counted on the hop index in one query: an executor may carry thousands of flows."""
    return CompiledHop.objects.filter(executor=executor_name).values("flow_id").distinct().count()


def _queue(flows: Iterable[tuple[int, int]]) -> None:
    """(flow id, owner id) pairs, for the scheduler's next recompile batch at the current revision
    (a verdict stored at it is replaced, a newer one never)."""
    revision = current_revision_number()
    FlowRefresh.objects.bulk_create(
        [FlowRefresh(flow_id=pk, revision=revision, owner_key=owner) for pk, owner in flows],
        update_conflicts=True,
        unique_fields=["flow"],
        update_fields=["revision", "requested", "owner_key"],
    )


@receiver(user_node_changed, dispatch_uid="flows.recompile_over_user_node")
def recompile_over(sender: Any, node: Any, **kwargs: Any) -> None:
    _queue(flows_naming(node.name).values_list("pk", "owner_id"))


@receiver(user_routing_changed, dispatch_uid="flows.recompile_over_user_kinds")
def recompile_over_kinds(sender: Any, kinds: Iterable[str], **kwargs: Any) -> None:
    nodes = DataNode.objects.filter(user_made=True, kind__in=list(kinds))
    if names := list(nodes.values_list("name", flat=True)):
        _queue(flows_over(names).values_list("pk", "owner_id"))
