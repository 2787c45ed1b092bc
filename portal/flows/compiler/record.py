"""Compile saved flows and record the verdicts: each flow's compilation
status/message (via flows.services.set_compilation; the one place a verdict
is stored), its job DAG and the indexed hops that let a topology change find
the flows it can affect.

Every stored verdict carries the topology revision number it was compiled
against; a write never replaces a verdict of a newer revision, so a slow
background recompile cannot undo a newer one (docs/topology.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from portal.bulk import any_of, insert_rows, update_rows
from portal.flows.compiler import (
    FAILED,
    CompiledFlow,
    compile_flow,
    usernodes,  # noqa: F401  # connects its receivers: the flows over a node
)
from portal.flows.compiler.templates import BatchTemplates
from portal.flows.models import CompiledHop, CompiledJobDag, FlowConfig
from portal.flows.services import set_compilation
from portal.topology.graph import TopologySnapshot, current_snapshot

logger = logging.getLogger(__name__)

INTERNAL_ERROR = "Internal compiler error; the portal log has the details."


VERDICT = ("status", "message")  # stored on the flow, not in its DAG


def stored_dag(compiled: CompiledFlow) -> dict[str, Any]:
    """What CompiledJobDag.dag keeps of a compile: all but the verdict."""
    return {key: value for key, value in compiled.to_dict().items() if key not in VERDICT}


def route_of(dag: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(job["sourceNode"], job["destinationNode"], job["executor"]) for job in dag.get("jobs", ())}


def _write_hops(flow_id: int, old: set[tuple[str, str, str]], new: set[tuple[str, str, str]]) -> None:
    if old == new:
        return
    CompiledHop.objects.filter(flow_id=flow_id).delete()
    CompiledHop.objects.bulk_create(
        CompiledHop(flow_id=flow_id, source=s, destination=d, executor=e) for s, d, e in sorted(new)
    )


def _compile(
    flow: FlowConfig, snapshot: TopologySnapshot, batch: BatchTemplates | None = None
) -> CompiledFlow | None:
    try:
        if batch is None:
            return compile_flow(flow, topology=snapshot)
        return compile_flow(
            flow, topology=snapshot, loader=batch.loader_for(flow.owner), access=batch.access_for(flow.owner)
        )
    except Exception:
        logger.exception("compiling flow %s failed", flow)
        return None


def compile_and_record(flow: FlowConfig, *, topology: TopologySnapshot | None = None) -> CompiledFlow | None:
    """On a flow's save, inside its transaction (the flow row is locked by
    the save). Never raises: a compiler bug must not roll back the user's
    save, so it is recorded as FAILED with a short message and logged."""
    snapshot = topology if topology is not None else current_snapshot()
    compiled = _compile(flow, snapshot)
    if compiled is None:
        set_compilation(flow, FAILED, INTERNAL_ERROR)
        return None
    with transaction.atomic():
        stored = CompiledJobDag.objects.select_for_update().filter(flow=flow).first()
        if stored is not None and stored.revision > snapshot.number:
            # The topology moved between reading it and locking the verdict,
            # and a newer verdict is stored: this older one must not win.
            if topology is None:
                return compile_and_record(flow)
            return compiled
        dag = stored_dag(compiled)
        CompiledJobDag.objects.update_or_create(
            flow=flow,
            defaults={
                "dag": dag,
                "topology_token": compiled.topology_token,
                "revision": snapshot.number,
            },
        )
        _write_hops(flow.pk, route_of(stored.dag) if stored else set(), route_of(dag))
        set_compilation(flow, compiled.status, compiled.message)
    return compiled


def record_batch(flows: Iterable[FlowConfig], snapshot: TopologySnapshot) -> dict[str, int]:
    """Recompile flows against `snapshot` and store what changed; call in a
    transaction with the flow rows locked. Idempotent: a flow whose verdict
    and DAG come out the same is not written (only its revision moves, so an
    older recompile cannot overwrite it afterwards). The writes are a few
    bulk statements per batch, not a few per flow. Returns counts of
    `changed`, `unchanged` and `stale` (a newer revision already stored)."""
    flows = list(flows)
    counts = {"changed": 0, "unchanged": 0, "stale": 0}
    stored = {
        dag.flow_id: dag
        for dag in CompiledJobDag.objects.select_for_update().filter(
            flow_id__in=any_of([f.pk for f in flows])
        )
    }
    templates = BatchTemplates()
    unchanged: list[int] = []
    new_dags: list[CompiledJobDag] = []
    changed_dags: list[CompiledJobDag] = []
    verdicts: list[FlowConfig] = []
    hops: dict[int, set[tuple[str, str, str]]] = {}
    for flow in flows:
        old = stored.get(flow.pk)
        if old is not None and old.revision > snapshot.number:
            counts["stale"] += 1
            continue
        compiled = _compile(flow, snapshot, templates)
        if compiled is None:
            status, message, dag = FAILED, INTERNAL_ERROR, None
        else:
            status, message, dag = compiled.status, compiled.message, stored_dag(compiled)
        if (flow.compilation_status, flow.compilation_message) != (status, message):
            flow.compilation_status, flow.compilation_message = status, message
            verdicts.append(flow)
        elif dag is None or (old is not None and old.dag == dag):
            unchanged.append(flow.pk)
            counts["unchanged"] += 1
            continue
        counts["changed"] += 1
        if dag is None or compiled is None:  # both or neither
            continue
        token = compiled.topology_token
        route = route_of(dag)
        if route != (route_of(old.dag) if old else set()):
            hops[flow.pk] = route
        if old is None:
            new_dags.append(
                CompiledJobDag(flow=flow, dag=dag, topology_token=token, revision=snapshot.number)
            )
        else:
            old.dag, old.topology_token, old.revision = dag, token, snapshot.number
            changed_dags.append(old)
    if new_dags:
        CompiledJobDag.objects.bulk_create(new_dags)
    if changed_dags:
        now = timezone.now()
        for row in changed_dags:
            row.compiled_at = now
        update_rows(changed_dags, ["dag", "topology_token", "revision", "compiled_at"])
    if verdicts:
        update_rows(verdicts, ["compilation_status", "compilation_message"])
    if hops:
        CompiledHop.objects.filter(flow_id__in=any_of(list(hops))).delete()
        rows = [(pk, *hop) for pk, route in hops.items() for hop in sorted(route)]
        insert_rows(
            CompiledHop,
            {
                "flow_id": [row[0] for row in rows],
                "source": [row[1] for row in rows],
                "destination": [row[2] for row in rows],
                "executor": [row[3] for row in rows],
            },
        )
    if unchanged:
        CompiledJobDag.objects.filter(flow_id__in=any_of(unchanged), revision__lt=snapshot.number).update(
            revision=snapshot.number
        )
    return counts


def recompile_all(*, topology: TopologySnapshot | None = None, batch: int = 500) -> dict[str, int]:
    """Every flow, in batches (`manage.py recompile_flows`; not called on a
    topology change, which recompiles only the flows it can affect)."""
    counts: dict[str, int] = {}
    ids = list(FlowConfig.objects.order_by("pk").values_list("pk", flat=True))
    for first in range(0, len(ids), batch):
        with transaction.atomic():
            snapshot = topology if topology is not None else current_snapshot()
            flows = (
                FlowConfig.objects.select_for_update(of=("self",))
                .select_related("owner")
                .filter(pk__in=ids[first : first + batch])
                .order_by("pk")
            )
            for key, value in record_batch(flows, snapshot).items():
                counts[key] = counts.get(key, 0) + value
    return counts
