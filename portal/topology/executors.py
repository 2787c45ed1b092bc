"""Executors and their capabilities: the SpecExecutors a flow's hops can run on and the
(source, destination) pairs each can carry, and the health the workers report. Every change
moves the topology revision (topology.revisions) in its transaction; a change to what an
executor serves of the users' own nodes recompiles the flows over those kinds."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.topology import revisions
from portal.topology.models import Capability, DataNode, SpecExecutor
from portal.topology.signals import executor_usage, user_routing_changed
from portal.topology.validators import unique_error

logger = logging.getLogger(__name__)

EXECUTOR_FIELDS = (
    "name",
    "uri",
    "technology",
    "location",
    "queue",
    "spark_master",
    "spark_conf",
    "description",
    "enabled",
    "cost",
    "user_sources",
    "user_destinations",
)


def _resolve_pairs(
    pairs: Iterable[tuple[str, str]], extra_nodes: Iterable[str] = ()
) -> list[tuple[str, str]]:
    """Check that every capability names existing data nodes; one message per problem."""
    pairs = list(pairs)
    rows = DataNode.objects.filter(name__in={n for pair in pairs for n in pair}).values_list(
        "name", "user_made"
    )
    known = {name for name, user_made in rows if not user_made}
    user_made = {name for name, made in rows if made}
    known.update(extra_nodes)
    problems = []
    seen = set()
    for source, destination in pairs:
        for role, name in (("source", source), ("destination", destination)):
            if name in user_made:
                problems.append(
                    f"{source} → {destination}: {name!r} is a user-made data node, routed by the executors' "
                    "user_sources / user_destinations, not by capabilities"
                )
            elif name not in known:
                problems.append(f"{source} → {destination}: unknown {role} data node {name!r}")
        if source == destination:
            problems.append(f"{source} → {destination}: source and destination are the same node")
        if (source, destination) in seen:
            problems.append(f"{source} → {destination}: listed twice")
        seen.add((source, destination))
    if problems:
        raise ValidationError({"capabilities": problems})
    return pairs


def _write_capabilities(executor: SpecExecutor, pairs: list[tuple[str, str]]) -> bool:
    """Make the executor's capabilities exactly `pairs`; True when anything changed."""
    wanted = set(pairs)
    current = {
        (c.source.name, c.destination.name): c
        for c in executor.capabilities.select_related("source", "destination")
    }
    stale = [c.pk for key, c in current.items() if key not in wanted]
    missing = [pair for pair in pairs if pair not in current]
    if stale:
        Capability.objects.filter(pk__in=stale).delete()
    if missing:
        nodes = DataNode.objects.in_bulk({n for pair in missing for n in pair}, field_name="name")
        for source, destination in missing:
            Capability.objects.create(executor=executor, source=nodes[source], destination=nodes[destination])
    return bool(stale or missing)


def create_executor(
    data: dict[str, Any], *, capabilities: Iterable[tuple[str, str]] = (), origin: str = ""
) -> SpecExecutor:
    executor = SpecExecutor(origin=origin, **{k: v for k, v in data.items() if k in EXECUTOR_FIELDS})
    executor.full_clean()
    pairs = _resolve_pairs(capabilities)
    try:
        with transaction.atomic():
            executor.save()
            _write_capabilities(executor, pairs)
            revisions.changed("executor", "add", executor)
            _user_routing_changed(_served_kinds(executor))
    except IntegrityError:
        raise (
            unique_error(SpecExecutor, "name", executor.name, "executor")
            or unique_error(SpecExecutor, "uri", executor.uri, "executor")
            or ValidationError("The executor could not be saved.")
        ) from None
    logger.info("executor %s created with %d capabilities", executor, len(pairs))
    return executor


def update_executor(
    executor: SpecExecutor, data: dict[str, Any], *, capabilities: Iterable[tuple[str, str]] | None = None
) -> SpecExecutor:
    if "name" in data and data["name"] != executor.name:
        raise ValidationError({"name": "An executor's name cannot change; create a new executor instead."})
    before = (_served(executor), executor.enabled, executor.cost)
    served_before = _served_kinds(executor)
    for field in EXECUTOR_FIELDS:
        if field in data:
            setattr(executor, field, data[field])
    executor.full_clean()
    pairs = _resolve_pairs(capabilities) if capabilities is not None else None
    try:
        with transaction.atomic():
            executor.save()
            if pairs is not None:
                _write_capabilities(executor, pairs)
            revisions.changed("executor", "update", executor)
            if pairs is not None or before != (_served(executor), executor.enabled, executor.cost):
                _user_routing_changed(served_before | _served_kinds(executor))
    except IntegrityError:
        raise unique_error(SpecExecutor, "uri", executor.uri, "executor") or ValidationError(
            "The executor could not be saved."
        ) from None
    return executor


def _served(executor: SpecExecutor) -> tuple[list[str], list[str]]:
    return executor.serves_users("source"), executor.serves_users("destination")


def _served_kinds(executor: SpecExecutor) -> set[str]:
    sources, destinations = _served(executor)
    return {*sources, *destinations}


def _user_routing_changed(kinds: set[str]) -> None:
    """User-made nodes are outside the snapshot the refresh planner diffs: the flows over those
    of the kinds an executor serves are recompiled when its serving may have changed."""
    if kinds:
        user_routing_changed.send(sender=SpecExecutor, kinds=sorted(kinds))


def set_enabled(executor: SpecExecutor, enabled: bool) -> SpecExecutor:
    """Disable (or re-enable) an executor: the compiler stops routing through it, so the flows
    routed through it are recompiled in the background and each goes to pending unless another
    enabled executor can carry its hops (`flows_routed_through` says how many before asking)."""
    return update_executor(executor, {"enabled": enabled})


def flows_routed_through(executor: SpecExecutor) -> int:
    """How many flows a hop of their stored DAG runs on the executor (the flows app answers from
    its hop index: topology may not read flows)."""
    answers = executor_usage.send(sender=SpecExecutor, executor_name=executor.name)
    return sum(int(count or 0) for _receiver, count in answers)


def delete_executor(executor: SpecExecutor) -> None:
    with transaction.atomic():
        served = _served_kinds(executor)
        executor.delete()
        revisions.changed("executor", "delete", executor)
        _user_routing_changed(served)
    logger.info("executor %s deleted", executor)


def add_capability(executor: SpecExecutor, source: str, destination: str) -> Capability:
    existing = [
        (c.source.name, c.destination.name)
        for c in executor.capabilities.select_related("source", "destination")
    ]
    if (source, destination) in existing:
        raise ValidationError({"capabilities": f"{executor.name} already has {source} → {destination}."})
    _resolve_pairs([*existing, (source, destination)])
    with transaction.atomic():
        capability = Capability.objects.create(
            executor=executor,
            source=DataNode.objects.get(name=source),
            destination=DataNode.objects.get(name=destination),
        )
        revisions.changed("capability", "add", capability)
    return capability


def remove_capability(capability: Capability) -> None:
    with transaction.atomic():
        capability.delete()
        revisions.changed("capability", "delete", capability)


def record_health(name: str, status: str, message: str = "", *, heartbeat: bool = True) -> SpecExecutor:
    """A worker heartbeat or a health monitor verdict. Only a change of the
    health the compiler sees is a topology change (it can change routing);
    heartbeats alone are not, nor is HEALTHY ↔ BUSY (both route alike)."""
    if status not in SpecExecutor.Health.values:
        raise ValidationError(
            {"health_status": f"{status!r} is not one of {', '.join(SpecExecutor.Health.values)}."}
        )
    with transaction.atomic():
        executor = SpecExecutor.objects.select_for_update().get(name=name)
        routing = SpecExecutor.routing_health
        changed = routing(executor.health_status) != routing(status)
        executor.health_status, executor.health_message = status, message
        if heartbeat:
            executor.last_heartbeat = timezone.now()
        executor.save(update_fields=["health_status", "health_message", "last_heartbeat", "updated"])
        if changed:
            revisions.changed("executor", "update", executor)
            _user_routing_changed(_served_kinds(executor))
    return executor
