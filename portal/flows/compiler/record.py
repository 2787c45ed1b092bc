"""Compile saved flows and record the verdicts: each flow's compilation
status/message (`set_compilation`, the one place a verdict is stored), its job
DAG and the indexed hops that let a topology change find the flows it can affect.

A save stores the compile its check made (`store`, called by flows.services
inside the saving transaction); a launch takes the stored plan back while it is
current (`current_plan`) instead of compiling again.

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
from portal.flows.compiler import COMPILED, FAILED, CompiledFlow, compile_flow
from portal.flows.compiler.templates import BatchTemplates
from portal.flows.models import CompiledHop, CompiledJobDag, FlowConfig, FlowRefresh
from portal.templatepacks.models import TemplatePack
from portal.templatepacks.uris import parse_template_uri
from portal.topology.graph import TopologySnapshot, current_snapshot
from portal.topology.services import current_revision_number

logger = logging.getLogger(__name__)

INTERNAL_ERROR = "Internal compiler error; the portal log has the details."


VERDICT = ("status", "message")  # stored on the flow, not in its DAG


def set_compilation(flow: FlowConfig, status: str, message: str) -> None:
    """Record the compiler's verdict without firing catalog events again."""
    FlowConfig.objects.filter(pk=flow.pk).update(compilation_status=status, compilation_message=message)
    flow.compilation_status, flow.compilation_message = status, message


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


def _write(flow: FlowConfig, compiled: CompiledFlow) -> bool:
    """Store `compiled` as the flow's verdict and DAG, unless a verdict of a newer topology
    revision is stored (then False: the caller compiles against that one)."""
    compiled = compiled.without_matches()
    dag = stored_dag(compiled)
    with transaction.atomic(savepoint=False):  # a save's own transaction when there is one
        stored = CompiledJobDag.objects.select_for_update().filter(flow=flow).first()
        if stored is not None and stored.revision > compiled.topology_revision:
            return False
        old_route = route_of(stored.dag) if stored else set()
        if stored is None:
            stored = CompiledJobDag(flow=flow)
        stored.dag, stored.topology_token, stored.revision = (
            dag,
            compiled.topology_token,
            compiled.topology_revision,
        )
        stored.save()
        _write_hops(flow.pk, old_route, route_of(dag))
        set_compilation(flow, compiled.status, compiled.message)
    return True


def store(flow: FlowConfig, compiled: CompiledFlow) -> None:
    """A save's own compile (flows.services.validate_flow's), stored inside the saving
    transaction after the flow's row: the verdict and DAG the check accepted, not a second
    compile. Compiled again only when the topology moved since the check."""
    if compiled.topology_revision != current_revision_number() or not _write(flow, compiled):
        compile_and_record(flow)


def compile_and_record(flow: FlowConfig, *, topology: TopologySnapshot | None = None) -> CompiledFlow | None:
    """Compile a saved flow and store the verdict (its secrets stored anew, a topology that moved
    under a save). Never raises: a compiler bug must not roll back the user's save, so it is
    recorded as FAILED with a short message and logged."""
    snapshot = topology if topology is not None else current_snapshot()
    compiled = _compile(flow, snapshot)
    if compiled is None:
        set_compilation(flow, FAILED, INTERNAL_ERROR)
        return None
    if not _write(flow, compiled) and topology is None:
        # The topology moved between reading it and locking the verdict,
        # and a newer verdict is stored: this older one must not win.
        return compile_and_record(flow)
    return compiled


def current_plan(flow: FlowConfig) -> CompiledFlow | None:
    """The flow's stored plan when compiling again would make the same one, for a launch: a
    COMPILED verdict of the flow as last saved (nothing changed it since, no background recompile
    queued for it), against the current topology revision, with the template pack versions it
    used still current. Otherwise None: compile anew. (Grants and group rights are checked again
    by the worker, whatever plan it runs.)"""
    if flow.compilation_status != COMPILED:
        return None
    stored = CompiledJobDag.objects.filter(flow=flow).first()
    if stored is None or stored.compiled_at < flow.updated or stored.revision != current_revision_number():
        return None
    if FlowRefresh.objects.filter(flow=flow).exists():
        return None
    pinned: dict[str, int] = {}
    for uri, number in (stored.dag.get("pinnedVersions") or {}).items():
        pack, _path = parse_template_uri(uri)
        if pack is not None:
            pinned[pack] = number
    if pinned:
        current = dict(
            TemplatePack.objects.filter(name__in=list(pinned)).values_list("name", "current_version__number")
        )
        if current != pinned:
            return None
    compiled = CompiledFlow.from_dict(stored.dag, topology_revision=stored.revision)
    return compiled if compiled.status == COMPILED else None


def record_batch(flows: Iterable[FlowConfig], snapshot: TopologySnapshot) -> dict[str, int]:  # noqa: C901, PLR0915
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
