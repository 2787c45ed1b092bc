"""The mutable TopologyCatalog: the only way data nodes, executors and
capabilities change, for pages, API and the topology file alike.

Every change validates first (model rules, then references), saves in one
transaction, moves the topology revision token and sends
`topology_catalog_changed` inside that transaction, so listeners (recompiling
flows) see exactly the committed topology or nothing.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, ProtectedError, Q
from django.utils import timezone

from portal.topology import access
from portal.topology.loader import sync_topology_file
from portal.topology.models import Capability, DataNode, SpecExecutor, TopologyRevision
from portal.topology.signals import topology_catalog_changed

logger = logging.getLogger(__name__)

DATA_NODE_FIELDS = ("name", "kind", "description", "properties")
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
)


_batch = threading.local()


@contextmanager
def batched_changes() -> Iterator[None]:
    """Many changes, one event: the topology file sync (and anything else
    that changes several entries at once) notifies listeners once at the end
    instead of recompiling every flow per entry. Use inside a transaction."""
    if getattr(_batch, "depth", 0):
        yield
        return
    _batch.depth, _batch.dirty = 1, False
    try:
        yield
        dirty = _batch.dirty
    finally:
        _batch.depth = 0
    if dirty:
        _changed("topology", "update", None)


def _changed(kind: str, action: str, instance: Any) -> None:
    """Move the revision token and tell listeners; call inside the transaction."""
    if getattr(_batch, "depth", 0):
        _batch.dirty = True
        return
    updated = TopologyRevision.objects.filter(pk=1).update(
        token=uuid.uuid4(), number=F("number") + 1, changed=timezone.now()
    )
    if not updated:
        TopologyRevision.objects.get_or_create(pk=1, defaults={"number": 1})
    sender = type(instance) if instance is not None else TopologyRevision
    topology_catalog_changed.send(sender=sender, action=action, kind=kind, instance=instance)


def current_revision() -> uuid.UUID | None:
    return TopologyRevision.objects.filter(pk=1).values_list("token", flat=True).first()


def current_revision_number() -> int:
    """The order of topology revisions (0 before the first change)."""
    return TopologyRevision.objects.filter(pk=1).values_list("number", flat=True).first() or 0


def _unique_error(
    model: type[DataNode | SpecExecutor], field: str, value: str, noun: str
) -> ValidationError | None:
    if model._default_manager.filter(**{field: value}).exists():
        return ValidationError({field: f"A {noun} with {field} {value!r} already exists."})
    return None


# --- data nodes ---------------------------------------------------------------


def create_data_node(data: dict[str, Any], *, origin: str = "") -> DataNode:
    """`data["acl"]`, when given, is the node's grants ([{role, user|group}], topology.access)."""
    node = DataNode(origin=origin, **{k: v for k, v in data.items() if k in DATA_NODE_FIELDS})
    node.full_clean()
    if "acl" in data:
        access.parse_grants(data["acl"])  # validated before anything is saved
    try:
        with transaction.atomic():
            node.save()
            if "acl" in data:
                access.set_grants(node, data["acl"])
            _changed("datanode", "add", node)
    except IntegrityError:
        raise _unique_error(DataNode, "name", node.name, "data node") or ValidationError(
            "The data node could not be saved."
        ) from None
    logger.info("data node %s created", node)
    return node


def update_data_node(node: DataNode, data: dict[str, Any]) -> DataNode:
    """All fields but the name, which capabilities and flows refer to."""
    if "name" in data and data["name"] != node.name:
        raise ValidationError({"name": "A data node's name cannot change; capabilities and flows use it."})
    for field in DATA_NODE_FIELDS:
        if field in data:
            setattr(node, field, data[field])
    node.full_clean()
    if "acl" in data:
        access.parse_grants(data["acl"])
    with transaction.atomic():
        node.save()
        if "acl" in data:
            access.set_grants(node, data["acl"])
        _changed("datanode", "update", node)
    return node


def delete_data_node(node: DataNode) -> None:
    users = sorted(
        {
            c.executor.name
            for c in Capability.objects.filter(Q(source=node) | Q(destination=node)).select_related(
                "executor"
            )
        }
    )
    if users:
        raise ValidationError(
            {
                "name": f"Data node {node.name!r} is used by capabilities of {', '.join(users)}; remove them first."
            }
        )
    try:
        with transaction.atomic():
            node.delete()
            _changed("datanode", "delete", node)
    except ProtectedError:
        raise ValidationError({"name": f"Data node {node.name!r} is still in use."}) from None


# --- executors ----------------------------------------------------------------


def _resolve_pairs(
    pairs: Iterable[tuple[str, str]], extra_nodes: Iterable[str] = ()
) -> list[tuple[str, str]]:
    """Check that every capability names existing data nodes; one message per problem."""
    pairs = list(pairs)
    known = set(
        DataNode.objects.filter(name__in={n for pair in pairs for n in pair}).values_list("name", flat=True)
    )
    known.update(extra_nodes)
    problems = []
    seen = set()
    for source, destination in pairs:
        for role, name in (("source", source), ("destination", destination)):
            if name not in known:
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
            _changed("executor", "add", executor)
    except IntegrityError:
        raise (
            _unique_error(SpecExecutor, "name", executor.name, "executor")
            or _unique_error(SpecExecutor, "uri", executor.uri, "executor")
            or ValidationError("The executor could not be saved.")
        ) from None
    logger.info("executor %s created with %d capabilities", executor, len(pairs))
    return executor


def update_executor(
    executor: SpecExecutor, data: dict[str, Any], *, capabilities: Iterable[tuple[str, str]] | None = None
) -> SpecExecutor:
    if "name" in data and data["name"] != executor.name:
        raise ValidationError({"name": "An executor's name cannot change; create a new executor instead."})
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
            _changed("executor", "update", executor)
    except IntegrityError:
        raise _unique_error(SpecExecutor, "uri", executor.uri, "executor") or ValidationError(
            "The executor could not be saved."
        ) from None
    return executor


def set_enabled(executor: SpecExecutor, enabled: bool) -> SpecExecutor:
    """Disable (or re-enable) an executor: the compiler stops routing through it."""
    return update_executor(executor, {"enabled": enabled})


def delete_executor(executor: SpecExecutor) -> None:
    with transaction.atomic():
        executor.delete()
        _changed("executor", "delete", executor)
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
        _changed("capability", "add", capability)
    return capability


def remove_capability(capability: Capability) -> None:
    with transaction.atomic():
        capability.delete()
        _changed("capability", "delete", capability)


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
            _changed("executor", "update", executor)
    return executor


def load_topology_file(path: str | Path) -> dict[str, int]:
    """Sync the topology from a YAML/HOCON file (idempotent); see topology.loader."""

    return sync_topology_file(Path(path))


def load_configured_topology() -> dict[str, int] | None:
    """Start-up hook for the web and scheduler processes: sync TOPOLOGY_FILE
    when it is set. Raises TopologyFileError (file:line: reason) on a bad file."""

    path = getattr(settings, "TOPOLOGY_FILE", "")
    return load_topology_file(path) if path else None
