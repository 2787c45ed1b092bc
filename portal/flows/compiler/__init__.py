"""The FlowCompiler (GaaS's SpecCompiler): a FlowConfig → a job DAG of
JobSpecs, each bound to one SpecExecutor.

`compile_flow` is pure: it reads the topology snapshot and the template
packs, and writes nothing. `portal.flows.compiler.record` stores its verdict.

Properties of each job, later layers winning: resolved templates (parent <
template < flow, done by templatepacks), a flow key written
`destination.<node>.<key>` for the hop landing in that node only
(compiler.scoped) → the hop keys below. The
hop keys are documented in docs/topology.md.
"""

from __future__ import annotations

from typing import Any

from portal.accounts.access import Principal
from portal.flows.compiler import scoped
from portal.flows.compiler.paths import Hop, search
from portal.flows.compiler.plans import COMPILED, FAILED, PENDING, CompiledFlow, JobSpecPlan
from portal.flows.compiler.templates import (
    Resolution,
    missing_attributes,
    required_message,
    resolve_flow_templates,
)
from portal.topology import tables
from portal.topology.grants import READ, WRITE, NodeAccess
from portal.topology.graph import TopologySnapshot, current_snapshot, with_user_nodes

__all__ = ["COMPILED", "FAILED", "PENDING", "CompiledFlow", "JobSpecPlan", "compile_flow", "job_name"]


def job_name(flow_group: str, flow_name: str, hop: Hop) -> str:
    """Stable across recompiles while the path stays the same."""
    return f"{flow_group}.{flow_name}.{hop.index}-{hop.source}-to-{hop.destination}"


def hop_properties(flow: Any, hop: Hop, snapshot: TopologySnapshot, name: str) -> dict[str, str]:
    executor = snapshot.executors[hop.executor]
    props = {
        "flow.group": flow.flow_group,
        "flow.name": flow.flow_name,
        "job.name": name,
        "flowport.hop.index": str(hop.index),
        "flowport.hop.source": hop.source,
        "flowport.hop.destination": hop.destination,
        "flowport.executor": executor.name,
        "flowport.executor.technology": executor.technology,
        "flowport.executor.location": executor.location,
        "flowport.executor.queue": executor.queue,
        "spark.master": executor.spark_master,
    }
    for role, node_name in (("source", hop.source), ("destination", hop.destination)):
        node = snapshot.nodes[node_name]
        props[f"flowport.hop.{role}.kind"] = node.kind
        for key, value in node.properties.items():
            props[f"flowport.hop.{role}.{key}"] = value
    return props


def _owner(flow: Any) -> Any:
    return flow.owner if getattr(flow, "owner_id", None) else None


def _check_grants(jobs: list[JobSpecPlan], owner: Principal | None, access: Any = None) -> None:
    """The owner reads the source and writes every node the flow publishes into (grants,
    topology.grants); each refusal is an error of the job. A compile with no owner at all (a bare
    FlowConfig in code) is left to the worker, which checks the grants of the saved flow's owner."""
    if owner is None:
        return

    access = access if access is not None else NodeAccess(owner)
    for job in jobs:
        checks = [(job.destination_node, WRITE)]
        if not job.parents:
            checks.insert(0, (job.source_node, READ))
        job.errors.extend(reason for node, action in checks if (reason := access.refusal(node, action)))


def _check_tables(jobs: list[JobSpecPlan], owner: Principal | None, flow_group: str) -> None:
    """The table each job names in a shared destination is its owner's, where the flow names it
    (portal.topology.tables; the worker decides it again on the table actually written)."""
    if owner is None:
        return
    for job in jobs:
        reason = tables.save_refusal(owner, job.destination_node, job.properties, flow_group)
        if reason:
            job.errors.append(reason)


def compile_flow(
    flow: Any,
    *,
    topology: TopologySnapshot | None = None,
    user: Principal | None = None,
    loader: Any = None,
    access: Any = None,
    resolution: Resolution | None = None,
) -> CompiledFlow:
    """Compile a (saved or unsaved) FlowConfig. `user` is whose pack access
    counts for templates; the flow's owner by default. `loader`, a
    TemplateLoader for that user, and `access`, the owner's NodeAccess, are
    shared by a batch of compiles. `resolution` is the flow's templates as
    already resolved for `user` (the save's check resolved them): not resolved again."""
    snapshot = topology if topology is not None else current_snapshot()
    compiled = CompiledFlow(
        flow_group=flow.flow_group,
        flow_name=flow.flow_name,
        source=flow.source,
        destinations=list(flow.destinations),
        topology_token=str(snapshot.token) if snapshot.token else None,
        topology_revision=snapshot.number,
    )
    if not flow.source:
        compiled.errors.append("The flow has no source; set its source data node.")
    if not flow.destinations:
        compiled.errors.append("The flow has no destinations; set at least one destination data node.")
    if compiled.errors:
        return compiled

    if resolution is None:
        resolution = resolve_flow_templates(
            flow, user if user is not None else getattr(flow, "owner", None), loader
        )
    compiled.pinned_versions = resolution.pinned_versions

    # The user-made nodes the flow names join the search for this compile only (topology.graph).
    snapshot = with_user_nodes(snapshot, flow.source, flow.destinations)
    result = search(snapshot, flow.source, list(flow.destinations))
    compiled.pending_reasons = [result.pending[d] for d in flow.destinations if d in result.pending]

    jobs: dict[tuple[str, str], JobSpecPlan] = {}
    for destination in flow.destinations:
        parent_name: str | None = None
        for hop in result.paths.get(destination, ()):
            key = (hop.source, hop.destination)
            job = jobs.get(key)
            if job is None:
                name = job_name(flow.flow_group, flow.flow_name, hop)
                executor = snapshot.executors[hop.executor]
                own = scoped.for_destination(resolution.properties, hop.destination, flow.destinations)
                properties = {**own, **hop_properties(flow, hop, snapshot, name)}
                job = jobs[key] = JobSpecPlan(
                    job_name=name,
                    hop_index=hop.index,
                    source_node=hop.source,
                    destination_node=hop.destination,
                    executor=executor.name,
                    technology=executor.technology,
                    location=executor.location,
                    queue=executor.queue,
                    spark_master=executor.spark_master,
                    spark_conf=dict(executor.spark_conf),
                    parents=[parent_name] if parent_name else [],
                    properties=properties,
                    errors=[
                        *resolution.errors,
                        *map(required_message, missing_attributes(resolution, properties)),
                    ],
                )
            job.serves_destinations.append(destination)
            parent_name = job.job_name
    compiled.jobs = sorted(jobs.values(), key=lambda job: (job.hop_index, job.job_name))
    _check_grants(compiled.jobs, user if user is not None else _owner(flow), access)
    _check_tables(compiled.jobs, user if user is not None else _owner(flow), flow.flow_group)
    if not compiled.jobs:  # nothing to attach template errors to: report them for the flow
        compiled.errors.extend(resolution.errors)
    return compiled
