"""What a newcomer does first, on the dashboard they land on after login.

An operator's dashboard (executor health, outbox backlog) tells someone who has no flow yet
nothing about where to begin; Airbyte users look for sources, destinations and connections, which
live here as data nodes under Topology. Until a user owns a flow, the dashboard opens with the
path the README's tour walks, each step linked and the ones already done ticked. Two indexed
existence checks: nothing grows with the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from portal.flows.models import FlowConfig
from portal.topology.models import DataNode


@dataclass(frozen=True)
class FirstSteps:
    has_node: bool  # a data node of their own: their database or folder


def first_steps(user: Any) -> FirstSteps | None:
    """The newcomer's next steps, or None once the user owns a flow (or is not signed in)."""
    if not getattr(user, "is_authenticated", False) or FlowConfig.objects.filter(owner=user).exists():
        return None
    return FirstSteps(has_node=DataNode.objects.filter(created_by=user).exists())
