"""Compile a saved flow and record the verdict: the flow's compilation
status/message (via flows.services.set_compilation) and its job DAG."""

from __future__ import annotations

import logging

from django.db import transaction

from portal.flows.compiler import FAILED, CompiledFlow, compile_flow
from portal.flows.models import FlowConfig
from portal.flows.services import set_compilation
from portal.topology.graph import TopologySnapshot
from portal.topology.models import CompiledJobDag

logger = logging.getLogger(__name__)


def compile_and_record(flow: FlowConfig, *, topology: TopologySnapshot | None = None) -> CompiledFlow | None:
    """Never raises: a compiler bug must not roll back the user's flow save,
    so it is recorded as FAILED with a short message and logged in full."""
    try:
        with transaction.atomic():
            compiled = compile_flow(flow, topology=topology)
            CompiledJobDag.objects.update_or_create(
                flow=flow,
                defaults={
                    "status": compiled.status,
                    "dag": compiled.to_dict(),
                    "topology_token": compiled.topology_token,
                },
            )
            set_compilation(flow, compiled.status, compiled.message)
            return compiled
    except Exception:
        logger.exception("compiling flow %s failed", flow)
        set_compilation(flow, FAILED, "Internal compiler error; the portal log has the details.")
        return None


def recompile_all(*, topology: TopologySnapshot | None = None) -> dict[str, int]:
    """After a topology change: every flow, so pending ones become runnable
    and compiled ones move off a removed or disabled executor."""
    counts: dict[str, int] = {}
    for flow in FlowConfig.objects.select_related("owner").iterator():
        compiled = compile_and_record(flow, topology=topology)
        status = compiled.status if compiled else FAILED
        counts[status] = counts.get(status, 0) + 1
    return counts
