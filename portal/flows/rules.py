"""Who may see and change a flow, registered with the access module
(accounts.access) in FlowsConfig.ready: every signed-in user sees the
catalog (secret values are ENC(...) ciphertext, so seeing a flow reveals no
secret); the owner, members of the flow's owning group (Gobblin's
`owningGroup`) and staff change and delete it."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from portal.accounts import access
from portal.flows.models import FlowConfig

CHANGE_DENIED = "Only the flow's owner or staff can change it."


def flow_rule(user: Any, action: str) -> Q:
    if action == access.VIEW or user.is_staff:
        return Q()
    return Q(owner=user) | Q(owning_group__in=user.groups.all())


def register() -> None:
    access.register(FlowConfig, flow_rule)
