"""Sharing a data node: its owners grant and revoke read and write to users and groups,
others ask for access, owners answer — every change audited (`DataNodeAuditEvent`), as a
template pack's ACL is.

Who may share a node: staff, and its owners (an owner grant to them or one of their groups) —
of a user-made node and of an administrator's node alike (an administrator makes someone an
owner to have them answer for it). Grants of a user-made node reach no topology revision: the
flows over it are recompiled (`signals.user_node_changed`), no other.
"""

from __future__ import annotations

from typing import cast

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from portal.accounts.access import Principal, account, is_account
from portal.accounts.grants import describe_grants, grants_diff
from portal.accounts.proxy import AnyRequest, actor_and_subject
from portal.topology import grants
from portal.topology.models import DataNode, DataNodeAccessRequest, DataNodeAuditEvent, DataNodeGrant
from portal.topology.signals import data_node_usage, user_node_changed

SHARED_ROLES = (DataNodeGrant.Role.READ.value, DataNodeGrant.Role.WRITE.value)


def record(
    node_name: str,
    action: str,
    *,
    user: Principal,
    summary: str,
    diff: str = "",
    request: AnyRequest | None = None,
) -> DataNodeAuditEvent:
    """One audit row; `user` is whom the change was made for (proxied calls name both)."""
    actor, on_behalf_of = actor_and_subject(request, account(user))
    return DataNodeAuditEvent.objects.create(
        node_name=node_name,
        action=action,
        actor=actor,
        on_behalf_of=on_behalf_of,
        summary=summary[:1000],
        diff=diff,
    )


def history(node: DataNode) -> QuerySet[DataNodeAuditEvent]:
    return DataNodeAuditEvent.objects.filter(node_name=node.name).select_related("actor", "on_behalf_of")


def is_owner(user: Principal, node: DataNode) -> bool:
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    mine = Q(user_id=user.pk) | Q(group__in=user.groups.values("id"))
    return node.grants.filter(mine, role=DataNodeGrant.Role.OWNER).exists()


def may_share(user: Principal, node: DataNode) -> bool:
    """Staff, and the node's owners."""
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return bool(user.is_staff or user.is_superuser) or is_owner(user, node)


def _require_sharer(user: Principal, node: DataNode) -> None:
    if not may_share(user, node):
        raise PermissionDenied(f"Only owners of data node {node.name} (and staff) may change who uses it.")


def flows_using(node: DataNode, limit: int = 50) -> tuple[list[str], int]:
    """The first `limit` flows that name the node, as flowGroup/flowName, and how many do (the
    flows app answers)."""
    names: set[str] = set()
    total = 0
    for _receiver, answer in data_node_usage.send(sender=DataNode, node_name=node.name, limit=limit):
        shown, count = cast(tuple[list[str], int], answer)
        names.update(shown)
        total += count
    return sorted(names)[:limit], total


def grants_changed(
    node: DataNode,
    before: list[dict[str, str]],
    *,
    user: Principal,
    request: AnyRequest | None = None,
    summary: str = "",
) -> None:
    """Audit a change of the node's grants (inside its transaction) and, for a user-made node,
    have the flows over it recompiled."""
    old, new = describe_grants(before), describe_grants(grants.grant_entries(node))
    if old == new:
        return
    record(
        node.name,
        DataNodeAuditEvent.Action.GRANTS,
        user=user,
        request=request,
        summary=summary or "grants changed",
        diff=grants_diff(old, new, "grants"),
    )
    if node.user_made:
        user_node_changed.send(sender=DataNode, node=node, action="grants")


def grant(
    node: DataNode,
    *,
    user: Principal,
    role: str,
    principal: dict[str, str],
    request: AnyRequest | None = None,
) -> DataNodeGrant | None:
    """Add a read or write grant to a user or group ({"user": name} or {"group": name}); None when
    it was there already. Owners are made through the node's whole access list (API `acl`)."""
    _require_sharer(user, node)
    if role not in SHARED_ROLES:
        raise ValidationError({"role": [f"Grant read or write, not {role!r}."]})
    try:
        (row,) = grants.parse_grants([{"role": role, **principal}])
    except ValidationError as error:
        raise ValidationError(
            {"principal": [message.removeprefix("entry 1: ") for message in error.messages]}
        ) from None
    with transaction.atomic():
        node = DataNode.objects.select_for_update().get(pk=node.pk)
        before = grants.grant_entries(node)
        row.node = node
        exists = node.grants.filter(role=role, user=row.user, group=row.group).exists()
        if exists:
            return None
        row.save()
        grants_changed(node, before, user=user, request=request, summary=f"{role} granted to {row.principal}")
    return row


def revoke(
    node: DataNode, grant_id: int, *, user: Principal, request: AnyRequest | None = None
) -> DataNodeGrant:
    """Remove a read or write grant (an owner stays: owners change through the access list)."""
    _require_sharer(user, node)
    with transaction.atomic():
        node = DataNode.objects.select_for_update().get(pk=node.pk)
        row = node.grants.select_related("user", "group").filter(pk=grant_id).first()
        if row is None:
            raise ValidationError({"grant": ["That grant is gone already."]})
        if row.role not in SHARED_ROLES:
            raise ValidationError(
                {"grant": ["An owner is changed through the node's access list, not revoked here."]}
            )
        before = grants.grant_entries(node)
        row.delete()
        grants_changed(
            node, before, user=user, request=request, summary=f"{row.role} revoked from {row.principal}"
        )
    return row


# --- access requests -----------------------------------------------------------------------


def request_access(
    node: DataNode,
    *,
    user: Principal,
    role: str = "read",
    message: str = "",
    request: AnyRequest | None = None,
) -> DataNodeAccessRequest:
    """Ask the node's owners for a read or write grant."""
    if role not in SHARED_ROLES:
        raise ValidationError({"role": [f"Ask for read or write, not {role!r}."]})
    if grants.may_use(user, node.name, role):
        raise ValidationError({"role": [f"You may already {role} data node {node.name}."]})
    try:
        with transaction.atomic():
            asked = DataNodeAccessRequest.objects.create(
                node=node, requested_by=account(user), role=role, message=message.strip()[:500]
            )
            record(
                node.name,
                DataNodeAuditEvent.Action.REQUEST,
                user=user,
                request=request,
                summary=f"{user.get_username()} asked to {role}"
                + (f": {asked.message}" if asked.message else ""),
            )
    except IntegrityError:
        raise ValidationError(
            {
                "role": [
                    f"You already asked to {role} data node {node.name}; its owners have not answered yet."
                ]
            }
        ) from None
    return asked


def open_requests(node: DataNode) -> QuerySet[DataNodeAccessRequest]:
    return node.access_requests.filter(decided_at__isnull=True).select_related("requested_by")


def pending_for(user: Principal, node: DataNode) -> list[str]:
    """The roles `user` asked for on the node and still waits for."""
    if not is_account(user) or not user.pk:
        return []
    return list(
        node.access_requests.filter(requested_by=user, decided_at__isnull=True).values_list("role", flat=True)
    )


def decide(
    node: DataNode, request_id: int, *, user: Principal, grant_it: bool, request: AnyRequest | None = None
) -> DataNodeAccessRequest:
    """An owner answers one open request; granting adds the grant asked for (audited)."""
    _require_sharer(user, node)
    with transaction.atomic():
        asked = (
            DataNodeAccessRequest.objects.select_for_update()
            .filter(node=node, pk=request_id, decided_at__isnull=True)
            .select_related("requested_by")
            .first()
        )
        if asked is None:
            raise ValidationError({"request": ["That request was already answered or withdrawn."]})
        who = asked.requested_by.get_username()
        if grant_it:
            grant(node, user=user, role=asked.role, principal={"user": who}, request=request)
        asked.granted, asked.decided_by, asked.decided_at = grant_it, account(user), timezone.now()
        asked.save(update_fields=["granted", "decided_by", "decided_at"])
        record(
            node.name,
            DataNodeAuditEvent.Action.ANSWER,
            user=user,
            request=request,
            summary=f"{'granted' if grant_it else 'declined'} {who}'s request to {asked.role}",
        )
    return asked


def awaiting_answer(user: Principal, limit: int = 20) -> tuple[list[DataNodeAccessRequest], int]:
    """The open requests `user` may answer, oldest first, and how many there are: those on the
    nodes they own (an owner grant to them or one of their groups) and, for staff, those on the
    administrators' nodes (which staff answer for). For the dashboard, so owners hear of them."""
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return [], 0
    mine = Q(user_id=user.pk) | Q(group__in=user.groups.values("id"))
    answerable = Q(
        node__in=DataNodeGrant.objects.filter(mine, role=DataNodeGrant.Role.OWNER).values("node_id")
    )
    if user.is_staff or user.is_superuser:
        answerable |= Q(node__user_made=False)
    waiting = DataNodeAccessRequest.objects.filter(answerable, decided_at__isnull=True)
    shown = list(waiting.select_related("node", "requested_by").order_by("created", "pk")[:limit])
    total = len(shown) if len(shown) < limit else waiting.count()
    return shown, total
