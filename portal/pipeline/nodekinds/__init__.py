"""Data node kinds, one module each: a kind's connection fields (which are secret), how a hop is
bound to a node of it (`bind`) and the login it gives its source or destination (`credentials`).

Every reader asks here: the launch (`orchestration.control.jobspecs.bind_hop`), the worker's guard
(`orchestration.worker.guard`), the JobSpec (`pipeline.jobspec.with_node_credentials`) and the node
form (`topology.nodefields`), so what is bound, what the worker expects and what the form says a
field sets are one declaration; the portal's Test connection and discovery find each kind's probe
by the kind's name (`pipeline.discovery.probes`). A kind that is not here (hive, kafka, other) binds nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from portal.pipeline.nodekinds import files, iceberg, jdbc
from portal.pipeline.nodekinds.kind import DESTINATION, ROLES, SOURCE, Field, Hop, NodeKind

__all__ = [
    "DESTINATION",
    "KINDS",
    "ROLES",
    "SOURCE",
    "Field",
    "Hop",
    "NodeKind",
    "bind",
    "binds",
    "credentials",
    "hop_node",
    "kind_for",
    "root_key",
    "table_key",
    "user_properties",
]

KINDS: dict[str, NodeKind] = {kind.name: kind for kind in (jdbc.KIND, files.KIND, iceberg.KIND)}

HOP = "flowport.hop."


def kind_for(name: str) -> NodeKind | None:
    """The kind of that name, or None for one the pipeline neither reads nor writes."""
    return KINDS.get(name)


def root_key(name: str) -> str:
    """The property holding a node's root folder on disk ("" for a kind with none)."""
    kind = KINDS.get(name)
    return kind.root_key if kind else ""


def table_key(name: str) -> str:
    """The pipeline key naming the table a hop writes into a node of the kind ("" for none)."""
    kind = KINDS.get(name)
    return kind.table_key if kind else ""


def user_properties(name: str) -> tuple[str, ...]:
    """The properties a node a user makes may hold (none for a kind users may not make)."""
    kind = KINDS.get(name)
    return kind.user_properties if kind else ()


def hop_node(properties: Mapping[str, str], role: str) -> tuple[str, dict[str, str]]:
    """The kind and properties of a hop's node in `role`, from the hop keys the compiler set
    (``flowport.hop.<role>.kind`` and ``flowport.hop.<role>.<property>``)."""
    prefix = f"{HOP}{role}."
    kind = properties.get(f"{prefix}kind", "")
    node = {
        k[len(prefix) :]: v for k, v in properties.items() if k.startswith(prefix) and k != f"{prefix}kind"
    }
    return kind, node


def bind(kind_name: str, role: str, node: Mapping[str, str], hop: Hop) -> dict[str, str]:
    """The pipeline keys a hop gets from a node of `kind_name` in `role`."""
    kind = kind_for(kind_name)
    return kind.bind(role, node, hop) if kind else {}


def credentials(kind_name: str, role: str, node: Mapping[str, str]) -> dict[str, str | None]:
    """The credential keys a node of `kind_name` decides for `role` (see `NodeKind.credentials`)."""
    kind = kind_for(kind_name)
    return kind.credentials(role, node) if kind else {}


def binds(kind_name: str, key: str) -> tuple[str, ...]:
    """The pipeline keys a node property sets, found by binding a node holding only it, as the
    source of a first hop and as the destination: what the node form tells the person typing it."""
    kind = kind_for(kind_name)
    if kind is None:
        return ()
    hop = Hop(flow_group="g", flow_name="f", data_dir="/")
    found: list[str] = []
    for role in ROLES:
        found.extend(k for k in kind.bind(role, {key: "x"}, hop) if k not in found)
    return tuple(found)
