"""Who may see and change a flow, registered with the access module
(accounts.access) in FlowsConfig.ready: every signed-in user sees the
catalog (secret values are ENC(...) ciphertext, so seeing a flow reveals no
secret); the owner, members of the flow's owning group (Gobblin's
`owningGroup`) and staff change and delete it."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from portal.accounts import access
from portal.accounts.access import Principal
from portal.flows.models import FlowConfig

CHANGE_DENIED = "Only the flow's owner or staff can change it."


def flow_rule(user: Principal, action: str) -> Q:
    if action == access.VIEW or user.is_staff:
        return Q()
    return Q(owner=user) | Q(owning_group__in=user.groups.all())


def flow_for(
    user: Principal,
    flow_group: str,
    flow_name: str,
    action: str = access.VIEW,
    *,
    queryset: QuerySet[FlowConfig] | None = None,
    denied: str = CHANGE_DENIED,
    missing: str = "",
) -> FlowConfig:
    """The flow at (group, name) that ``user`` may ``action``: a 404 (``missing``) when they may not
    see it, a 403 (``denied``: who may) when they see it but may not ``action`` it. Every page and
    endpoint addressed by a flow's key asks here (``queryset``: the related rows it reads besides;
    the executions' pages word a denial as who may run it)."""
    return access.get_allowed(
        FlowConfig.objects.select_related("owner") if queryset is None else queryset,
        user,
        action,
        denied=denied,
        missing=missing,
        flow_group=flow_group,
        flow_name=flow_name,
    )


def register() -> None:
    access.register(FlowConfig, flow_rule)
