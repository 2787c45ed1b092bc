"""The mutable TopologyCatalog: the only way data nodes, executors and
capabilities change, for pages, API and the topology file alike. Data nodes are
here; executors and capabilities are in topology.executors and the revision in
topology.revisions, both re-exported below so callers have one front door.

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
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeGuard

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError, Q

from portal.accounts import access as account_access
from portal.accounts.access import Principal
from portal.accounts.proxy import AnyRequest
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, looks_encrypted
from portal.crypto.errors import EncryptionError, MasterKeyError
from portal.crypto.secretnames import names_secret
from portal.keys.models import CustomerKey
from portal.keys.services import binding_for, encrypt_value, holds_key, owner_problems, wrap_customer_key
from portal.topology import grants, nodefields, policy, revisions, sharing
from portal.topology.executors import EXECUTOR_FIELDS as EXECUTOR_FIELDS
from portal.topology.executors import add_capability as add_capability
from portal.topology.executors import create_executor as create_executor
from portal.topology.executors import delete_executor as delete_executor
from portal.topology.executors import flows_routed_through as flows_routed_through
from portal.topology.executors import record_health as record_health
from portal.topology.executors import remove_capability as remove_capability
from portal.topology.executors import set_enabled as set_enabled
from portal.topology.executors import update_executor as update_executor
from portal.topology.models import Capability, DataNode, DataNodeAuditEvent, DataNodeGrant
from portal.topology.reach import node_root
from portal.topology.revisions import batched_changes as batched_changes
from portal.topology.revisions import current_revision as current_revision
from portal.topology.revisions import current_revision_number as current_revision_number
from portal.topology.signals import user_node_changed
from portal.topology.topologyfile import sync_topology_file
from portal.topology.validators import unique_error

logger = logging.getLogger(__name__)

DATA_NODE_FIELDS = ("name", "kind", "description", "properties")
# The label of the customer key the portal makes for a node owner who has none.
NODE_KEY_LABEL = "data node credentials"


# --- data nodes ---------------------------------------------------------------


def _under_policy(user: Principal | None) -> TypeGuard[Principal]:
    """A user who is not staff: what they make is user-made, within the administrators' policy.
    The topology file (no user) and staff have an administrator's say."""
    return user is not None and not (user.is_staff or user.is_superuser)


def create_data_node(
    data: dict[str, Any],
    *,
    origin: str = "",
    user: Principal | None = None,
    request: AnyRequest | None = None,
) -> DataNode:
    """`data["acl"]`, when given, is the node's grants ([{role, user|group}], topology.grants).
    Without `user` (the topology file) or by staff: an administrator's node. By any other user:
    a user-made node (`create_user_node`)."""
    if _under_policy(user):
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
            revisions.changed("datanode", "add", node)
            if user is not None:
                _audit(node, DataNodeAuditEvent.Action.CREATE, user, request, "created")
    except IntegrityError:
        raise unique_error(DataNode, "name", node.name, "data node") or ValidationError(
            "The data node could not be saved."
        ) from None
    logger.info("data node %s created", node)
    return node


def create_user_node(user: Principal, data: dict[str, Any], *, request: AnyRequest | None = None) -> DataNode:
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
        created_by=account_access.account(user),
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
            get_user_model().objects.select_for_update().filter(pk=account_access.account(user).pk).first()
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
        raise unique_error(DataNode, "name", node.name, "data node") or ValidationError(
            "The data node could not be saved."
        ) from None
    _make_folder(node)
    logger.info("data node %s made by %s", node, user)
    return node


def update_data_node(  # noqa: C901
    node: DataNode, data: dict[str, Any], *, user: Principal | None = None, request: AnyRequest | None = None
) -> DataNode:
    """All fields but the name, which capabilities and flows refer to. A user who is not staff
    changes only a user-made node they own, within the policy; a user-made node's change moves no
    revision but recompiles the flows over it."""
    if "name" in data and data["name"] != node.name:
        raise ValidationError({"name": "A data node's name cannot change; capabilities and flows use it."})
    if _under_policy(user) and not account_access.can(user, account_access.CHANGE, node):
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
    if _under_policy(user) and connection_changed:
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
        if _under_policy(user):
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
            revisions.changed("datanode", "update", node)
        if user is not None:
            if connection_changed or node.description != description:
                _audit(node, DataNodeAuditEvent.Action.UPDATE, user, request, _change_summary(before, node))
            if entries is not None:
                sharing.grants_changed(node, old_grants, user=user, request=request)
    if node.user_made and connection_changed:
        _make_folder(node)
    return node


def delete_data_node(
    node: DataNode, *, user: Principal | None = None, request: AnyRequest | None = None
) -> None:
    """An administrator's node goes once no capability uses it; a user-made node once no flow
    names it (the refusal names them), by its owners or staff."""
    if _under_policy(user) and not account_access.can(user, account_access.DELETE, node):
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
                revisions.changed("datanode", "delete", node)
            if user is not None:
                _audit(node, DataNodeAuditEvent.Action.DELETE, user, request, "deleted")
    except ProtectedError:
        raise ValidationError({"name": f"Data node {node.name!r} is still in use."}) from None


def _audit(node: DataNode, action: str, user: Principal, request: AnyRequest | None, summary: str) -> None:
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


def _owner_group(user: Principal, name: str) -> Group | None:
    """The group a user-made node is made for: one the user belongs to."""
    if not name:
        return None
    group = account_access.restrict(Group.objects.filter(name=name), user, account_access.CHANGE).first()
    if group is None:  # the same answer whether the group exists or not
        raise ValidationError({"owner": [f"You are not a member of a group named {name!r}."]})
    return group


def _check_group_owners(user: Principal, rows: Iterable[DataNodeGrant]) -> None:
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


def _editing_group(user: Principal, node: DataNode) -> Group | None:
    """Whose key a secret typed into an existing node goes under: the node's owning group when
    the editor is one of its members, else the editor's own."""
    for grant in node.grants.filter(role=DataNodeGrant.Role.OWNER, group__isnull=False).select_related(
        "group"
    ):
        if grant.group is not None and user.groups.filter(pk=grant.group.pk).exists():
            return grant.group
    return None


def _check_policy(user: Principal, kind: str, properties: dict[str, Any]) -> None:
    found = policy.problems(user, kind, properties)
    if "kind" in found:
        raise ValidationError({"kind": [found["kind"]]})
    if found:
        raise ValidationError({"properties": [f"{key}: {reason}" for key, reason in sorted(found.items())]})


def _check_credentials(user: Principal, properties: dict[str, Any]) -> None:
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


def _sealed(data: dict[str, Any], user: Principal | None, group: Group | None) -> dict[str, Any]:
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


def _owner_key(user: Principal, group: Group | None) -> str:
    """The owner's newest customer key, wrapped; one made for them (or the group) if none."""
    keys = (
        CustomerKey.objects.filter(owner_group=group)
        if group
        else CustomerKey.objects.filter(owner_user=account_access.account(user))
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


def load_topology_file(path: str | Path) -> dict[str, int]:
    """Sync the topology from a YAML/HOCON file (idempotent); see topology.topologyfile."""

    return sync_topology_file(Path(path))


def load_configured_topology() -> dict[str, int] | None:
    """Start-up hook for the web and scheduler processes: sync TOPOLOGY_FILE
    when it is set. Raises TopologyFileError (file:line: reason) on a bad file."""

    path = getattr(settings, "TOPOLOGY_FILE", "")
    return load_topology_file(path) if path else None
