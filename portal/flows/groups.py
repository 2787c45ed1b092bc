"""Flow group ownership: no one but a group's owner publishes into ``<node>/<flowGroup>/…``."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from portal.accounts.access import Principal, account
from portal.flows.models import FlowGroup


def refusal(user: Principal, flow_group: str) -> str | None:
    """Why `user` may not own a flow in `flow_group`, or None (an unclaimed group is free)."""
    group = FlowGroup.objects.select_related("owner_user", "owner_group").filter(name=flow_group).first()
    if group is None or group.admits(user):
        return None
    return (
        f"flow group {flow_group!r} belongs to {group.owner_name}; only its owner (or a member of its "
        "owning group) creates flows in it. Choose another flow group."
    )


def check(user: Principal, flow_group: str) -> None:
    reason = refusal(user, flow_group)
    if reason:
        raise ValidationError({"flow_group": [reason]})


def claim(user: Principal, flow_group: str) -> None:
    """Inside the flow's save transaction: the group's first flow claims it for its owner; a
    concurrent claim by someone else is re-checked and refused."""
    if FlowGroup.objects.filter(name=flow_group).exists():
        check(user, flow_group)
        return
    try:
        with transaction.atomic():
            FlowGroup.objects.create(name=flow_group, owner_user=account(user))
    except IntegrityError:
        check(user, flow_group)
