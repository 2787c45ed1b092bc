"""What a newcomer does first: the page they land on after their first login, and the dashboard's
reminder until they own a flow.

An operator's dashboard (executor health, outbox backlog) tells someone who has no flow yet
nothing about where to begin; Airbyte users look for sources, destinations and connections, which
live here as data nodes. A user with no flow and no data node of their own lands on the start page
(`newcomer`), which says which of three steps is next: a source data node, a flow, a run and where
its data went. A handful of indexed queries: nothing grows with the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass

from portal.accounts.access import Principal, account, is_account
from portal.flows.models import FlowConfig
from portal.orchestration.models import FlowExecution
from portal.topology import catalog, grants
from portal.topology.models import DataNode, DataNodeGrant

SHOWN_NODES = 5


@dataclass(frozen=True)
class FirstSteps:
    has_node: bool  # a data node of their own: their database or folder


@dataclass(frozen=True)
class Progress:
    """Where a user stands on the way to their first delivered data."""

    own_node: bool
    usable_nodes: list[DataNode]  # the first few they may use (a shared source to pick)
    flow: FlowConfig | None  # their most recently made flow
    execution: FlowExecution | None  # that flow's latest run

    @property
    def next_step(self) -> int:
        """1: add or pick a source node, 2: create a flow, 3: run it, 4: all done."""
        if self.flow is None:
            return 2 if self.own_node or self.usable_nodes else 1
        return 4 if self.execution is not None else 3


def newcomer(user: Principal) -> bool:
    """No flow and no data node of their own (made by them, or owned: an owner answers the
    requests for it on the dashboard): a first login, sent to the start page."""
    return (
        is_account(user)
        and not FlowConfig.objects.filter(owner=user).exists()
        and not DataNode.objects.filter(created_by=user).exists()
        and not DataNode.objects.filter(grants.granted_to(user, [DataNodeGrant.Role.OWNER])).exists()
    )


def first_steps(user: Principal) -> FirstSteps | None:
    """The newcomer's next steps, or None once the user owns a flow (or is not signed in)."""
    if not is_account(user) or FlowConfig.objects.filter(owner=user).exists():
        return None
    return FirstSteps(has_node=DataNode.objects.filter(created_by=user).exists())


def progress(user: Principal) -> Progress:
    """How far the newcomer got (the start page's checklist); an account's, never the visitor's."""
    user = account(user)
    flow = FlowConfig.objects.filter(owner=user).order_by("-pk").first()
    execution = (
        FlowExecution.objects.filter(flow_group=flow.flow_group, flow_name=flow.flow_name)
        .order_by("-execution_id")
        .first()
        if flow is not None
        else None
    )
    return Progress(
        own_node=DataNode.objects.filter(created_by=user).exists(),
        usable_nodes=list(catalog.usable(user).order_by("name").only("name", "kind")[:SHOWN_NODES]),
        flow=flow,
        execution=execution,
    )
