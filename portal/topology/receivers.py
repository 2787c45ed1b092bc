"""Catalog listeners (connected in TopologyConfig.ready): the compiler
follows flow and topology changes inside the saving transaction."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from portal.flows.signals import flow_catalog_changed
from portal.topology.signals import topology_catalog_changed


@receiver(flow_catalog_changed, dispatch_uid="topology.compile_on_flow_change")
def compile_on_flow_change(sender: Any, action: str, flow: Any, **kwargs: Any) -> None:
    if action in ("add", "update"):
        from portal.flows.compiler.record import compile_and_record

        compile_and_record(flow)


@receiver(topology_catalog_changed, dispatch_uid="topology.recompile_on_topology_change")
def recompile_on_topology_change(sender: Any, action: str, **kwargs: Any) -> None:
    from portal.flows.compiler.record import recompile_all

    recompile_all()
