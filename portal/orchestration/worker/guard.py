"""The worker's own check of a job before it reads or writes anything.

The web tier refuses bad properties at save, but the worker trusts nothing the web tier (or the
broker) sent: it re-derives every node-owned key (paths, JDBC URLs, the hop keys, the Spark conf)
from the data nodes and the executor in the database and refuses a job whose JobSpec differs;
resolves every path inside its node's root (no ``..``, no symlink escape) and the publish dir to
the flow's own namespace ``<node>/<flowGroup>/<flowName>``; refuses class paths outside the allowed
packages, secrets in clear, wrapped keys that are not the flow owner's, and nodes that reach the
portal's own secrets. A refused job fails with the reason before anything is read or written.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from portal.accounts.access import Principal
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, looks_encrypted
from portal.crypto.errors import EncryptionError
from portal.flows import groups as flow_groups
from portal.flows.models import FlowConfig
from portal.keys.services import holds_key, owner_problems
from portal.pipeline import node_relative, nodekinds
from portal.pipeline.confinement import ConfinementError, confine, resolve
from portal.pipeline.nodekinds import ROLES, Hop
from portal.pipeline.propertyrules import (
    NODE,
    base_key,
    class_problems,
    clear_secret_keys,
    control_problems,
    owner_of,
    urn_problems,
)
from portal.topology.grants import READ, WRITE
from portal.topology.grants import refusal as access_refusal
from portal.topology.models import DataNode, SpecExecutor
from portal.topology.reach import node_problems, node_root, portal_secrets_problems

logger = logging.getLogger(__name__)

HOP = "flowport.hop."
# Informational compiler keys the pipeline never reads to reach data.
_INFORMATIONAL = ("flowport.hop.index", "flowport.executor", "spark.master")


class JobRefused(Exception):
    """The job's spec asks for something its flow may not do."""


def refusal(job: Any, spec: dict[str, Any]) -> str | None:
    """Why the worker must not run this job, or None."""
    try:
        check(job, spec)
    except JobRefused as error:
        return f"Refused by the worker's security check: {error}"
    return None


def check(job: Any, spec: dict[str, Any]) -> None:
    execution = job.execution
    group, name = execution.flow_group, execution.flow_name
    for field, expected in (("flow_group", group), ("flow_name", name), ("job_name", job.job_name)):
        if spec.get(field) != expected:
            raise JobRefused(f"the JobSpec's {field} {spec.get(field)!r} is not the execution's {expected!r}")
    props = spec.get("properties")
    if not isinstance(props, dict):
        raise JobRefused("the JobSpec has no properties")
    flow = FlowConfig.objects.select_related("owner").filter(flow_group=group, flow_name=name).first()
    if flow is None:
        raise JobRefused(f"flow {group}/{name} no longer exists")
    group_refusal = flow_groups.refusal(flow.owner, group)
    if group_refusal:
        raise JobRefused(group_refusal)
    nodes = _hop_nodes(props)
    checks = [(nodes["destination"].name, WRITE)]
    if not job.parents:
        checks.insert(0, (nodes["source"].name, READ))
    for node_name, action in checks:
        reason = access_refusal(flow.owner, node_name, action)
        if reason:
            raise JobRefused(reason)
    _check_executor(job, spec)
    _check_node_keys(job, spec, props, nodes, group, name)
    _check_user_keys(props)
    _check_wrapped_keys(flow.owner, props)


def _hop_nodes(props: dict[str, str]) -> dict[str, DataNode]:
    """The hop's source and destination nodes from the database; the hop keys must be theirs."""
    names = {role: props.get(f"{HOP}{role}", "") for role in ("source", "destination")}
    rows = {n.name: n for n in DataNode.objects.filter(name__in=[v for v in names.values() if v])}
    nodes = {}
    for role, node_name in names.items():
        node = rows.get(node_name)
        if node is None:
            raise JobRefused(f"the {role} data node {node_name!r} does not exist")
        expected = {f"{HOP}{role}.kind": node.kind}
        expected.update({f"{HOP}{role}.{k}": v for k, v in (node.properties or {}).items()})
        given = {k: v for k, v in props.items() if k.startswith(f"{HOP}{role}.")}
        for key in sorted(set(expected) | set(given)):
            if given.get(key) != expected.get(key):
                raise JobRefused(f"{key!r} is not what data node {node_name!r} says")
        reach = node_problems(node.kind, dict(node.properties or {}))
        if reach:
            raise JobRefused(f"data node {node_name!r}: {'; '.join(reach.values())}")
        nodes[role] = node
    return nodes


def _check_executor(job: Any, spec: dict[str, Any]) -> None:
    executor = SpecExecutor.objects.filter(name=job.executor).first()
    conf = dict(executor.spark_conf or {}) if executor else {}
    if dict(spec.get("spark_conf") or {}) != conf:
        raise JobRefused(f"the JobSpec's Spark conf is not executor {job.executor!r}'s")
    if executor and spec.get("spark_master") and spec["spark_master"] != executor.spark_master:
        raise JobRefused(f"the JobSpec's Spark master is not executor {job.executor!r}'s")


def _expected_node_keys(job: Any, nodes: dict[str, DataNode], group: str, name: str) -> dict[str, str]:
    """The node-owned keys the job may hold: what the nodes' kinds bind (`portal.pipeline.nodekinds`,
    as the launch does), from the nodes in the database. A branch's ``.N`` key is checked against
    its base key."""
    expected: dict[str, str] = {"flow.group": group, "flow.name": name, "job.name": job.job_name}
    hop = Hop(
        flow_group=group, flow_name=name, data_dir=str(settings.FLOWPORT_DATA_DIR), first=not job.parents
    )
    for role in ROLES:
        node = nodes[role]
        expected.update(nodekinds.bind(node.kind, role, dict(node.properties or {}), hop))
    return expected


def _check_node_keys(
    job: Any, spec: dict[str, Any], props: dict[str, str], nodes: dict[str, DataNode], group: str, name: str
) -> None:
    expected = _expected_node_keys(job, nodes, group, name)
    for key, value in sorted(props.items()):
        if owner_of(key) != NODE or key.startswith(HOP) or key.startswith(_INFORMATIONAL):
            continue
        want = expected.get(key, expected.get(base_key(key)))
        if want is None or value != want:
            raise JobRefused(f"{key!r} = {value!r} is not what the flow's data nodes give")
    try:
        work_root = str(settings.FLOWPORT_WORK_DIR)
        work_dir = spec.get("work_dir") or ""
        if work_dir != f"{work_root.rstrip('/')}/{group}/{name}":
            raise ConfinementError(f"work_dir: '{work_dir}' is not the flow's own work folder")
        confine(work_dir, work_root, "work_dir")
        source, destination = nodes["source"], nodes["destination"]
        if "source.files.path" in props:
            root = node_root(source.properties["path"])
            confine(props["source.files.path"], root, "source.files.path")
            if job.parents:  # a later hop reads only what this flow published
                _own_namespace(props["source.files.path"], root, group, name, "source.files.path")
        for key, value in props.items():
            if base_key(key) == "data.publisher.final.dir":
                root = node_root(destination.properties["path"])
                confine(value, root, key)
                _own_namespace(value, root, group, name, key)
    except ConfinementError as error:
        raise JobRefused(str(error)) from None


def _own_namespace(path: str, root: str, group: str, name: str, what: str) -> None:
    """``path`` resolves (symlinks followed) to ``<root>/<group>/<name>`` or below it: a symlink at
    the group or flow folder cannot lead into another flow's namespace."""
    namespace = f"{resolve(root).rstrip('/')}/{group}/{name}"
    resolved = resolve(path)
    if resolved != namespace and not resolved.startswith(namespace + "/"):
        raise ConfinementError(f"{what}: '{path}' is not inside the flow's own namespace {group}/{name}")


def _check_user_keys(props: dict[str, str]) -> None:
    user_props = {k: v for k, v in props.items() if not k.startswith(HOP)}
    problems = control_problems(props) + class_problems(user_props) + urn_problems(user_props)
    problems += node_relative.problems(user_props)
    problems += [
        f"{key!r} names a secret but is in clear" for key in clear_secret_keys(user_props, looks_encrypted)
    ]
    if problems:
        raise JobRefused("; ".join(problems))


def _check_wrapped_keys(owner: Principal | None, props: dict[str, str]) -> None:
    """Every customer key the job would decrypt with (outside the nodes' own) is the owner's."""
    for key, value in sorted(props.items()):
        if key.startswith(HOP) or not (
            key == WRAPPED_KEY_PROPERTY or key.endswith("." + WRAPPED_KEY_PROPERTY)
        ):
            continue
        try:
            held = holds_key(owner, value)
        except EncryptionError as error:
            raise JobRefused(f"{key!r}: {error}") from None
        if not held:
            raise JobRefused(f"{key!r} is not one of the flow owner's customer keys; its secrets stay sealed")
    # Each ENC(...) value is bound to its key's owner (AEAD associated data): another owner's,
    # copied into this flow, stays sealed even under a key the owner shares with them.
    problems = owner_problems(owner, props, skip=lambda name: name.startswith(HOP))
    if problems:
        raise JobRefused("; ".join(problems) + " Its secrets stay sealed.")


def startup_problems() -> list[str]:
    """Data nodes that reach the portal's master key, secret key, work area or database."""
    return portal_secrets_problems(DataNode.objects.all())


def refuse_to_start(**_: Any) -> None:
    """Celery ``worker_init``: a worker does not start while a data node reaches the portal's
    master key or database (SystemExit, which Celery's signal dispatch does not swallow)."""
    from django.db import DatabaseError

    try:
        problems = startup_problems()
    except DatabaseError:  # no database yet: the per-job check still runs
        logger.warning("could not check the data nodes at worker start", exc_info=True)
        return
    if problems:
        for line in problems:
            logger.critical("refusing to start: %s", line)
        raise SystemExit("refusing to start: " + "; ".join(problems))


def connect() -> None:
    from celery.signals import worker_init

    worker_init.connect(refuse_to_start, dispatch_uid="flowport-guard-refuse-to-start")
