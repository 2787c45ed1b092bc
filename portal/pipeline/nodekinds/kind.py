"""The shape every data node kind has: its fields, and how a hop is bound to a node of it.

A flow names data nodes, never paths or URLs; the portal turns a node into the pipeline keys of a
hop (`bind`) and into the login its source or destination connects with (`credentials`). The
compiler's launch (`orchestration.control.jobspecs`), the worker's guard
(`orchestration.worker.guard`), the JobSpec (`pipeline.jobspec`) and the node form
(`topology.nodefields`) all ask the kind, so what is bound, what is checked and what the form says
a field sets cannot drift apart. Django-free: where relative paths live (FLOWPORT_DATA_DIR) comes in
with the `Hop`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from portal.crypto.secretnames import names_secret

SOURCE, DESTINATION = "source", "destination"
ROLES = (SOURCE, DESTINATION)


@dataclass(frozen=True)
class Field:
    """One connection field of a node kind: the node property, and how the node form asks for it."""

    key: str  # the node property
    label: str
    help: str
    required: bool = False
    placeholder: str = ""

    @property
    def secret(self) -> bool:
        """A key the schema calls a secret: a password box, and its value stored as ENC(...)."""
        return names_secret(self.key)


@dataclass(frozen=True)
class Hop:
    """Where a node is bound: the flow whose namespace it publishes into, whether the hop is the
    flow's first (it reads the source node itself; a later hop reads what its parent published),
    and how many fork branches write to the destination (each gets its own ``.N`` publish key)."""

    flow_group: str
    flow_name: str
    data_dir: str  # FLOWPORT_DATA_DIR: a relative node path is under it
    first: bool = True
    branches: int = 1

    def rooted(self, path: str) -> str:
        return rooted(path, self.data_dir)

    def namespace(self, path: str) -> str:
        """The flow's own folder under a node's root: ``<root>/<flowGroup>/<flowName>``."""
        return f"{self.rooted(path).rstrip('/')}/{self.flow_group}/{self.flow_name}"


def rooted(path: str, data_dir: str | Path) -> str:
    """A node's path as the pipeline gets it: a relative one is relative to FLOWPORT_DATA_DIR."""
    if "://" in path or os.path.isabs(path):
        return path
    return str(Path(data_dir) / path)


# A node's properties (the `flowport.hop.<role>.*` keys, prefix removed) → the pipeline keys.
Bind = Callable[[str, Mapping[str, str], Hop], dict[str, str]]
# A node's properties → the credential keys it decides for a role: a value, or None where the node
# decides there is none (the flow's own is dropped); empty when the flow's own login stands.
Credentials = Callable[[str, Mapping[str, str]], dict[str, str | None]]


def no_credentials(role: str, node: Mapping[str, str]) -> dict[str, str | None]:
    """A kind that logs in to nothing: the flow's own keys, if any, are left as they are."""
    return {}


@dataclass(frozen=True)
class NodeKind:
    """A data node kind the pipeline reads from or writes to."""

    name: str
    fields: tuple[Field, ...]
    bind: Bind
    credentials: Credentials = no_credentials
    # The source a first hop reads a node of this kind with, unless the flow names one.
    source_class: str = ""
    # The `writer.output.format` a hop writing into a node of this kind uses, unless the flow names one.
    writer_format: str = ""
    # The node property holding its root folder on disk ("" for a kind with none): what must not
    # reach the portal's own places, and what is shown to staff only.
    root_key: str = ""
    # The pipeline key naming the table a hop writes into a node of this kind ("" for a kind with
    # no tables): a table a tenant's flow creates is theirs (topology.tables).
    table_key: str = ""
    # The properties a node a user makes for themselves may hold (topology.policy); the rest are
    # an administrator's to set.
    user_properties: tuple[str, ...] = ()
