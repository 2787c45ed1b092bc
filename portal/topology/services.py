"""The mutable TopologyCatalog: the only way data nodes, executors and
capabilities change, for pages, API and the topology file alike.

Every change validates first (model rules, then references), saves in one
transaction, moves the topology revision token and sends
`topology_catalog_changed` inside that transaction, so listeners (recompiling
flows) see exactly the committed topology or nothing.

A data node a signed-in user makes for themselves (`user` not staff) is
user-made: checked against the administrators' policy (topology.policy), owned
by them or one of their groups (an owner grant), its typed credentials stored
`ENC(...)` under the owner's customer key (one is made for an owner who has
none), audited. It moves no revision — it is not in the topology snapshot, the
compiler adds it per flow (topology.graph) — so thousands of users making
nodes rebuild nothing; a change to one recompiles only the flows over it
(`signals.user_node_changed`).
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
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, ProtectedError, Q
from django.utils import timezone

from portal.accounts import access as account_access
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, looks_encrypted
from portal.crypto.errors import EncryptionError, MasterKeyError
from portal.crypto.secretnames import names_secret
from portal.keys.models import CustomerKey
from portal.keys.services import binding_for, encrypt_value, holds_key, owner_problems, wrap_customer_key
from portal.topology import grants, nodefields, policy, sharing
from portal.topology.models import (
    Capability,
    DataNode,
    DataNodeAuditEvent,
    DataNodeGrant,
    SpecExecutor,
    TopologyRevision,
)
from portal.topology.reach import node_root
from portal.topology.signals import (
    executor_usage,
    topology_catalog_changed,
    user_node_changed,
    user_routing_changed,
)
from portal.topology.topologyfile import sync_topology_file

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
    "user_sources",
    "user_destinations",
)
# The label of the customer key the portal makes for a node owner who has none.
NODE_KEY_LABEL = "data node credentials"


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


def _full_control(user: Any) -> bool:
    """The topology file (no user) and staff: an administrator's say, no user policy."""
    return user is None or bool(user.is_staff or user.is_superuser)


def create_data_node(
    data: dict[str, Any], *, origin: str = "", user: Any = None, request: Any = None
) -> DataNode:
    """`data["acl"]`, when given, is the node's grants ([{role, user|group}], topology.grants).
    Without `user` (the topology file) or by staff: an administrator's node. By any other user:
    a user-made node (`create_user_node`)."""
    if not _full_control(user):
        return create_user_node(user, data, request=request)
    data = _sealed(data, user, None)
    node = DataNode(origin=origin, **{k: v for k, v in data.items() if k in DATA_NODE_FIELDS})
    node.full_clean()
    if "acl" in data:
        grants.parse_grants(data["acl"])  # validated before anything is saved
    try:
        with transaction.atomic():
            node.save()
            if "acl" in data:
                grants.set_grants(node, data["acl"])
            _changed("datanode", "add", node)
            if user is not None:
                _audit(node, DataNodeAuditEvent.Action.CREATE, user, request, "created")
    except IntegrityError:
        raise _unique_error(DataNode, "name", node.name, "data node") or ValidationError(
            "The data node could not be saved."
        ) from None
    logger.info("data node %s created", node)
    return node


def create_user_node(user: Any, data: dict[str, Any], *, request: Any = None) -> DataNode:
    """A node `user` makes for themselves, or for one of their groups (`data["owner"]`, a group
    name): within the policy, its typed `secrets` sealed under the owner's key, owned (the owner
    grant, plus any `acl` entries), audited; no topology revision moves."""
    group = _owner_group(user, data.get("owner") or "")
    kind = data.get("kind") or DataNode.Kind.FILES
    _check_policy(user, kind, dict(data.get("properties") or {}))
    data = _sealed(data, user, group)
    properties = dict(data.get("properties") or {})
    _check_credentials(user, properties)
    node = DataNode(
        user_made=True,
        created_by=user,
        **{k: v for k, v in data.items() if k in DATA_NODE_FIELDS},
    )
    node.full_clean()
    owner = {
        "role": DataNodeGrant.Role.OWNER.value,
        **({"group": group.name} if group else {"user": user.username}),
    }
    entries = [owner, *[e for e in data.get("acl") or [] if e != owner]]
    rows = grants.parse_grants(entries)
    _check_group_owners(user, rows)
    try:
        with transaction.atomic():
            # The user's row locked while counting: parallel creations are counted one after another.
            get_user_model().objects.select_for_update().filter(pk=user.pk).first()
            quota = policy.quota_problem(user)
            if quota:
                raise ValidationError(quota)
            node.save()
            grants.set_grants(node, entries)
            _audit(
                node,
                DataNodeAuditEvent.Action.CREATE,
                user,
                request,
                f"created, owned by {_principal(owner)}",
            )
    except IntegrityError:
        raise _unique_error(DataNode, "name", node.name, "data node") or ValidationError(
            "The data node could not be saved."
        ) from None
    _make_folder(node)
    logger.info("data node %s made by %s", node, user)
    return node


def update_data_node(  # noqa: C901
    node: DataNode, data: dict[str, Any], *, user: Any = None, request: Any = None
) -> DataNode:
    """All fields but the name, which capabilities and flows refer to. A user who is not staff
    changes only a user-made node they own, within the policy; a user-made node's change moves no
    revision but recompiles the flows over it."""
    if "name" in data and data["name"] != node.name:
        raise ValidationError({"name": "A data node's name cannot change; capabilities and flows use it."})
    if not _full_control(user) and not account_access.can(user, account_access.CHANGE, node):
        raise PermissionDenied(f"Only the owners of data node {node.name} (and staff) may change it.")
    before = {"kind": node.kind, "properties": dict(node.properties or {})}
    description = node.description
    group = _editing_group(user, node) if user is not None else None
    if data.get("secrets") and "properties" not in data:  # only a new password: the rest stays
        data = {**data, "properties": dict(node.properties or {})}
    data = _sealed({"kind": node.kind, **data}, user, group) if user is not None else data
    for field in DATA_NODE_FIELDS:
        if field in data:
            setattr(node, field, data[field])
    connection_changed = before != {"kind": node.kind, "properties": dict(node.properties or {})}
    if not _full_control(user) and connection_changed:
        # Where a node may point is its maker's to have (policy.bounds_for): a co-owner's
        # change stays inside the maker's databases and areas, not the co-owner's.
        _check_policy(node.created_by or user, node.kind, dict(node.properties or {}))
        _check_credentials(user, dict(node.properties or {}))
    node.full_clean()
    entries = data.get("acl")
    if entries is not None:
        rows = grants.parse_grants(entries)
        if node.user_made and not any(row.role == DataNodeGrant.Role.OWNER for row in rows):
            raise ValidationError({"acl": ["A user-made data node needs at least one owner."]})
        if not _full_control(user):
            kept = {grant.group_id for grant in node.grants.filter(role=DataNodeGrant.Role.OWNER)}
            _check_group_owners(user, [row for row in rows if row.group_id not in kept])
    with transaction.atomic():
        old_grants = grants.grant_entries(node)
        node.save()
        if entries is not None:
            grants.set_grants(node, entries)
        if node.user_made:
            if connection_changed:
                user_node_changed.send(sender=DataNode, node=node, action="update")
        else:
            _changed("datanode", "update", node)
        if user is not None:
            if connection_changed or node.description != description:
                _audit(node, DataNodeAuditEvent.Action.UPDATE, user, request, _change_summary(before, node))
            if entries is not None:
                sharing.grants_changed(node, old_grants, user=user, request=request)
    if node.user_made and connection_changed:
        _make_folder(node)
    return node


def delete_data_node(node: DataNode, *, user: Any = None, request: Any = None) -> None:
    """An administrator's node goes once no capability uses it; a user-made node once no flow
    names it (the refusal names them), by its owners or staff."""
    if not _full_control(user) and not account_access.can(user, account_access.DELETE, node):
        raise PermissionDenied(f"Only the owners of data node {node.name} (and staff) may delete it.")
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
    if node.user_made:
        flows, total = sharing.flows_using(node, limit=10)
        if total:
            shown = ", ".join(flows) + (f" and {total - len(flows)} more" if total > len(flows) else "")
            raise ValidationError(
                {"name": f"Data node {node.name!r} is used by flows {shown}; change or delete them first."}
            )
    try:
        with transaction.atomic():
            node.delete()
            if not node.user_made:
                _changed("datanode", "delete", node)
            if user is not None:
                _audit(node, DataNodeAuditEvent.Action.DELETE, user, request, "deleted")
    except ProtectedError:
        raise ValidationError({"name": f"Data node {node.name!r} is still in use."}) from None


def _audit(node: DataNode, action: str, user: Any, request: Any, summary: str) -> None:
    sharing.record(node.name, action, user=user, request=request, summary=summary)


def _principal(entry: dict[str, str]) -> str:
    return f"user {entry['user']}" if "user" in entry else f"group {entry['group']}"


def _change_summary(before: dict[str, Any], node: DataNode) -> str:
    """What changed, secrets named but never shown."""
    old, new = before["properties"], dict(node.properties or {})
    changed = sorted(key for key in set(old) | set(new) if old.get(key) != new.get(key))
    parts = [f"kind {before['kind']} → {node.kind}"] if before["kind"] != node.kind else []
    parts += [f"{key} changed" for key in changed]
    return "; ".join(parts) or "description changed"


def _owner_group(user: Any, name: str) -> Group | None:
    """The group a user-made node is made for: one the user belongs to."""
    if not name:
        return None
    group = account_access.restrict(Group.objects.filter(name=name), user, account_access.CHANGE).first()
    if group is None:  # the same answer whether the group exists or not
        raise ValidationError({"owner": [f"You are not a member of a group named {name!r}."]})
    return group


def _check_group_owners(user: Any, rows: Iterable[DataNodeGrant]) -> None:
    """A group owns a user-made node only by the hand of one of its members: its owners see the
    node's credentials and its members' keys seal them."""
    member_of = set(user.groups.values_list("pk", flat=True))
    for row in rows:
        if (
            row.role == DataNodeGrant.Role.OWNER
            and row.group_id is not None
            and row.group_id not in member_of
        ):
            name = row.group.name if row.group is not None else ""
            raise ValidationError({"acl": [f"You are not a member of a group named {name!r}."]})


def _editing_group(user: Any, node: DataNode) -> Group | None:
    """Whose key a secret typed into an existing node goes under: the node's owning group when
    the editor is one of its members, else the editor's own."""
    for grant in node.grants.filter(role=DataNodeGrant.Role.OWNER, group__isnull=False).select_related(
        "group"
    ):
        if grant.group is not None and user.groups.filter(pk=grant.group.pk).exists():
            return grant.group
    return None


def _check_policy(user: Any, kind: str, properties: dict[str, Any]) -> None:
    found = policy.problems(user, kind, properties)
    if "kind" in found:
        raise ValidationError({"kind": [found["kind"]]})
    if found:
        raise ValidationError({"properties": [f"{key}: {reason}" for key, reason in sorted(found.items())]})


def _check_credentials(user: Any, properties: dict[str, Any]) -> None:
    """A user-made node's ENC(...) values are its saver's: bound to them or one of their groups,
    under a key they hold. Another owner's value, copied in, would have the worker decrypt it
    for a connection to wherever this node points."""
    problems = [
        f"{message.split(chr(39))[1]}: {message}" if message.startswith("'") else message
        for message in owner_problems(user, properties)
    ]
    wrapped = properties.get(WRAPPED_KEY_PROPERTY)
    encrypted = [
        key for key, value in properties.items() if isinstance(value, str) and looks_encrypted(value)
    ]
    if encrypted and not wrapped:
        problems.append(f"{encrypted[0]}: ENC(...) needs the {WRAPPED_KEY_PROPERTY} it was made with")
    elif isinstance(wrapped, str) and wrapped:
        try:
            held = holds_key(user, wrapped)
        except EncryptionError as error:
            problems.append(f"{WRAPPED_KEY_PROPERTY}: {error}")
        else:
            if not held:
                problems.append(f"{WRAPPED_KEY_PROPERTY}: not one of your or your groups' customer keys")
    if problems:
        raise ValidationError({"properties": problems})


def _sealed(data: dict[str, Any], user: Any, group: Group | None) -> dict[str, Any]:
    """`data` with its typed `secrets` ({property: clear text}) stored as ENC(...) in its
    properties, under the owner's customer key (made now if they have none), with that key."""
    typed = {key: value for key, value in (data.get("secrets") or {}).items() if value}
    if not typed:
        return data
    kind = data.get("kind") or DataNode.Kind.FILES
    secret_keys = {spec.key for spec in nodefields.fields_of(kind) if spec.secret}
    unknown = sorted(key for key in typed if key not in secret_keys and not names_secret(key))
    if unknown:
        raise ValidationError({"secrets": [f"{key}: not a secret of a {kind} node" for key in unknown]})
    if user is None:
        raise ValidationError({"secrets": ["Typed secrets need a user whose key seals them."]})
    properties = dict(data.get("properties") or {})
    wrapped = _owner_key(user, group)
    try:
        binding = binding_for(user, wrapped)
        for key, value in typed.items():
            properties[key] = value if looks_encrypted(value) else encrypt_value(wrapped, value, binding)
    except MasterKeyError as error:
        logger.error("master key unavailable while sealing a data node's credentials: %s", error)
        raise ValidationError(
            {"secrets": ["Credentials cannot be encrypted now: the portal's master key is not available."]}
        ) from None
    except EncryptionError as error:
        raise ValidationError({"secrets": [f"A credential cannot be encrypted: {error}"]}) from None
    properties[WRAPPED_KEY_PROPERTY] = wrapped
    return {**data, "properties": properties}


def _owner_key(user: Any, group: Group | None) -> str:
    """The owner's newest customer key, wrapped; one made for them (or the group) if none."""
    keys = (
        CustomerKey.objects.filter(owner_group=group)
        if group
        else CustomerKey.objects.filter(owner_user=user)
    )
    key = keys.first()
    if key is None:
        try:
            key = wrap_customer_key(
                user=user, generate=True, label=NODE_KEY_LABEL, group=group.name if group else None
            ).customer_key
        except (ValidationError, MasterKeyError):
            key = keys.first()  # made concurrently by another save; or the master key is missing
            if key is None:
                raise ValidationError(
                    {"secrets": ["No customer key could be made for these credentials (see Keys)."]}
                ) from None
        logger.info("customer key made for %s's data node credentials", group or user)
    return key.wrapped_key


def _make_folder(node: DataNode) -> None:
    """A user-made files node's root exists from the start (its area's folder), so Test
    connection answers and a flow can publish into it."""
    path = (node.properties or {}).get("path")
    if node.kind != DataNode.Kind.FILES or not isinstance(path, str) or not path:
        return
    try:
        Path(node_root(path)).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        logger.warning("could not make the folder of data node %s: %s", node.name, error)


# --- executors ----------------------------------------------------------------


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
            _changed("executor", "add", executor)
            _user_routing_changed(_served_kinds(executor))
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
            _changed("executor", "update", executor)
            if pairs is not None or before != (_served(executor), executor.enabled, executor.cost):
                _user_routing_changed(served_before | _served_kinds(executor))
    except IntegrityError:
        raise _unique_error(SpecExecutor, "uri", executor.uri, "executor") or ValidationError(
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
        _changed("executor", "delete", executor)
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
            _user_routing_changed(_served_kinds(executor))
    return executor


def load_topology_file(path: str | Path) -> dict[str, int]:
    """Sync the topology from a YAML/HOCON file (idempotent); see topology.topologyfile."""

    return sync_topology_file(Path(path))


def load_configured_topology() -> dict[str, int] | None:
    """Start-up hook for the web and scheduler processes: sync TOPOLOGY_FILE
    when it is set. Raises TopologyFileError (file:line: reason) on a bad file."""

    path = getattr(settings, "TOPOLOGY_FILE", "")
    return load_topology_file(path) if path else None
