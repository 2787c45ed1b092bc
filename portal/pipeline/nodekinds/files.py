"""A folder (local, ``hdfs://`` or ``s3a://``): the file source reads it, and every flow publishes
into its own namespace under it, ``<root>/<flowGroup>/<flowName>``, always, so two flows
publishing to one node never meet."""

from __future__ import annotations

from collections.abc import Mapping

from portal.pipeline.nodekinds.kind import DESTINATION, SOURCE, Field, Hop, NodeKind
from portal.pipeline.propertyrules import FILES_SOURCE_CLASS

FIELDS = (
    Field(
        "path",
        "Root folder",
        "A local path (relative ones are under FLOWPORT_DATA_DIR), hdfs://… or s3a://…; "
        "a flow publishes under <root>/<flowGroup>/<flowName>/.",
        required=True,
        placeholder="var/data/lake",
    ),
)

SOURCE_CLASS = FILES_SOURCE_CLASS


def bind(role: str, node: Mapping[str, str], hop: Hop) -> dict[str, str]:
    """A first hop reads the node's root; a later hop reads what its parent published there (the
    flow's namespace); a destination is always published to the flow's namespace, with a fork's
    every branch there too (its files are told apart by their branch index)."""
    path = node.get("path")
    if not path:
        return {}
    if role == SOURCE:
        return {"source.files.path": hop.rooted(path) if hop.first else hop.namespace(path)}
    if role != DESTINATION:
        return {}
    target = hop.namespace(path)
    if hop.branches > 1:
        return {f"data.publisher.final.dir.{i}": target for i in range(hop.branches)}
    return {"data.publisher.final.dir": target}


KIND = NodeKind(
    name="files",
    fields=FIELDS,
    bind=bind,
    source_class=SOURCE_CLASS,
    root_key="path",
    user_properties=("path",),
)
