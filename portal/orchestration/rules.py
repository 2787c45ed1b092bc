"""Who may see and act on an execution, registered with the access module
(accounts.access) in OrchestrationConfig.ready. Access follows the flow's own
rule (flows.rules): whoever may see a flow sees its executions; whoever may
change it (its owner, its owning group, staff) may run it and kill or resume
its executions. An execution whose flow was deleted has no owner left: only
staff see it and act on it. A dataset's state (its watermarks) is the user's
whose flow made it: only they (and staff) may carry it over to a new flow
(statestore.adopt_state)."""

from __future__ import annotations

from django.db.models import Q

from portal.accounts import access
from portal.accounts.access import Principal
from portal.flows.models import FlowConfig
from portal.orchestration.models import DatasetState, FlowExecution


def execution_rule(user: Principal, action: str) -> Q:
    if user.is_staff:
        return Q()
    flows = FlowConfig.objects.restrict(user, action)
    if not flows.query.where:
        # Every flow allowed: no `flow_id IN (SELECT … every flow)`, which keeps
        # PostgreSQL from walking the newest-first index of millions of rows.
        return Q(flow__isnull=False)
    return Q(flow__in=flows)


def dataset_state_rule(user: Principal, action: str) -> Q:
    return Q() if user.is_staff else Q(owner_id=user.pk)


def register() -> None:
    access.register(FlowExecution, execution_rule)
    access.register(DatasetState, dataset_state_rule)
