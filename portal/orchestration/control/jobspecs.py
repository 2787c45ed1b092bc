"""From a compiled hop to the JobSpec an executor runs.

The compiler gives each job the flow's resolved properties plus the hop keys
(`flowport.hop.source.*`, `flowport.hop.destination.*`). Binding turns the
data nodes into the pipeline's own keys, so a flow names nodes and never
paths:

* first hop — the source node feeds the source, as its kind binds it
  (`portal.pipeline.nodekinds`): a `files` node gives the
  file source and `source.files.path`; a `jdbc` node gives the JDBC source
  and `source.jdbc.url` (flow keys win where set);
* later hops — a replication hop: it reads what its parent published
  (`source.files.path` = the parent's publish dir, format = the parent's
  writer format) and copies it as is, so the flow's extract, converter,
  quality, fork and column-rule keys apply to the first hop only (a later
  hop would hash or encrypt again); after a fork it copies
  branch 0 (its files, `*-b0.*`, in its format);
* every hop — the destination node's kind binds the writer
  (`portal.pipeline.nodekinds`, which the worker's guard expects too):
  a `files` destination publishes to
  `<node path>/<flowGroup>/<flowName>` (`data.publisher.final.dir`, or
  `.N` for each branch of a fork), always; a `jdbc` destination sets
  `writer.output.format=jdbc` and `writer.jdbc.url` (and `.driver`); an
  `iceberg` destination sets `writer.output.format=ICEBERG`,
  `writer.iceberg.catalog.uri` and `writer.iceberg.warehouse`.

Relative node paths are relative to FLOWPORT_DATA_DIR. Node-owned keys
(`portal.pipeline.propertyrules`: paths, JDBC URLs and drivers) are always taken
from the nodes here, whatever the properties say: the flow save refuses them,
this drops them again, and the worker (`orchestration.worker.guard`) checks the
result against the nodes in the database before it reads or writes anything.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from portal.orchestration.control import replays
from portal.pipeline import nodekinds
from portal.pipeline.nodekinds import DESTINATION, SOURCE, Hop, hop_node, kind_for
from portal.pipeline.nodekinds.files import SOURCE_CLASS as FILES_SOURCE
from portal.pipeline.properties import is_branch_scoped
from portal.pipeline.propertyrules import NODE, base_key, owner_of

FIRST_HOP_ONLY = ("source.", "extract.", "converter.", "qualitychecker.", "fork.", "dataset.urn", "columns.")
# Node-owned keys the compiler itself sets (the hop keys); every other node-owned key is bound here.
COMPILER_KEYS = ("flowport.", "flow.group", "flow.name", "job.name", "spark.master")


def _strip_node_keys(props: dict[str, str]) -> dict[str, str]:
    return {
        k: v
        for k, v in props.items()
        if owner_of(k) != NODE or k.startswith(COMPILER_KEYS[0]) or k in COMPILER_KEYS[1:]
    }


def _hop(props: dict[str, str], *, first: bool, branches: int = 1) -> Hop:
    return Hop(
        flow_group=props.get("flow.group", ""),
        flow_name=props.get("flow.name", ""),
        data_dir=str(settings.FLOWPORT_DATA_DIR),
        first=first,
        branches=branches,
    )


def publish_dir(props: dict[str, str], flow_group: str, flow_name: str) -> str | None:
    kind, conn = hop_node(props, DESTINATION)
    hop = Hop(flow_group=flow_group, flow_name=flow_name, data_dir=str(settings.FLOWPORT_DATA_DIR))
    return nodekinds.bind(kind, DESTINATION, conn, hop).get("data.publisher.final.dir")


def bind_hop(plan: dict[str, Any], parents: list[dict[str, Any]], *, final: bool) -> dict[str, str]:
    """The pipeline properties of one compiled job (`plan` in the compiler's
    camelCase dict form; `parents` the same for its parent jobs). The nodes'
    keys are their kinds' (`portal.pipeline.nodekinds`), which the worker's
    guard expects too."""
    props = _strip_node_keys(dict(plan["properties"]))
    group, name = props.get("flow.group", ""), props.get("flow.name", "")
    if parents:
        parent = parents[0]
        props = {k: v for k, v in props.items() if not k.startswith(FIRST_HOP_ONLY)}
        parent_dir = publish_dir(parent["properties"], group, name)
        props["source.class"] = FILES_SOURCE
        if parent_dir:
            props["source.files.path"] = parent_dir
        fmt = parent["properties"].get("writer.output.format", "parquet")
        if _branches(parent["properties"]) > 1:
            # A forked parent published every branch to one folder: the next hop copies branch 0.
            fmt = parent["properties"].get("writer.output.format.0", fmt)
            props = {k: v for k, v in props.items() if not (is_branch_scoped(k) and base_key(k) != k)}
            props["source.files.glob"] = "*-b0.*"
            props["writer.output.format"] = fmt
        props["source.files.format"] = fmt
    else:
        kind_name, conn = hop_node(props, SOURCE)
        kind = kind_for(kind_name)
        if kind is not None and kind.source_class:
            props.setdefault("source.class", kind.source_class)
            props.update(kind.bind(SOURCE, conn, _hop(props, first=True)))
    kind_name, conn = hop_node(props, DESTINATION)
    kind = kind_for(kind_name)
    if kind is not None:
        if kind.writer_format:
            props.setdefault("writer.output.format", kind.writer_format)
        branches = _branches(props) if not parents else 1
        props.update(kind.bind(DESTINATION, conn, _hop(props, first=not parents, branches=branches)))
    return props


def _branches(props: dict[str, str]) -> int:
    try:
        return max(1, int(props.get("fork.branches", "1") or 1))
    except ValueError:
        return 1  # the pipeline reports the bad value


def build_jobspec(
    execution: Any, plan: dict[str, Any], jobs_by_name: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The JobSpec dict for `plan` in `execution` (previous watermarks are
    added by the worker from the state store, when the job starts)."""
    parents = [jobs_by_name[p] for p in plan.get("parents", []) if p in jobs_by_name]
    children = [j for j in jobs_by_name.values() if plan["jobName"] in j.get("parents", [])]
    spec: dict[str, Any] = {
        "job_name": plan["jobName"],
        "flow_id": execution.flow_id,  # whose state the job reads and writes
        "flow_group": execution.flow_group,
        "flow_name": execution.flow_name,
        "execution_id": execution.execution_id,
        "properties": bind_hop(plan, parents, final=not children),
        "work_dir": f"{settings.FLOWPORT_WORK_DIR.rstrip('/')}/{execution.flow_group}/{execution.flow_name}",
        "spark_master": plan.get("sparkMaster", ""),
        "spark_conf": dict(plan.get("sparkConf") or {}),
        "technology": plan.get("technology", ""),
        "executor": plan.get("executor", ""),
    }
    if execution.backfill and not parents:
        spec["backfill"] = {urn: dict(bounds) for urn, bounds in execution.backfill.items()}
        replays.bind(spec, spec["properties"].get("flowport.hop.destination.kind", ""))
    return spec
