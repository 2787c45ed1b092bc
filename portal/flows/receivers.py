"""Catalog listeners (connected in FlowsConfig.ready): reactions to a save
that flows.services.validate_flow accepted before anything was written. The
flow is compiled inside its saving transaction; a topology change only moves the revision
there, and the scheduler recompiles the flows it can affect after the commit
(portal.flows.refresh), so the change commits in milliseconds."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from portal.flows.compiler.record import compile_and_record
from portal.flows.signals import flow_catalog_changed


@receiver(flow_catalog_changed, dispatch_uid="flows.compile_on_flow_change")
def compile_on_flow_change(sender: Any, action: str, flow: Any, **kwargs: Any) -> None:
    if action in ("add", "update", "secrets"):
        compile_and_record(flow)
