"""Apache Iceberg tables in a SQL catalog: a destination only. The catalog's password is the
flow's (``writer.iceberg.catalog.password=ENC(...)``), never in the node's URL."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from portal.pipeline.nodekinds.kind import DESTINATION, Field, Hop, NodeKind, rooted

FIELDS = (
    Field(
        "catalog.uri",
        "SQL catalog URL",
        "The Iceberg catalog's database as a SQLAlchemy URL, without a password: sqlite:///catalog.db "
        "(a relative path is under FLOWPORT_DATA_DIR) or postgresql+psycopg://user@host:5432/catalog; "
        "a flow gives the password as writer.iceberg.catalog.password.",
        required=True,
        placeholder="sqlite:///lake/catalog.db",
    ),
    Field(
        "warehouse",
        "Warehouse folder",
        "Where the tables' data and metadata files go (a relative path is under FLOWPORT_DATA_DIR).",
        required=True,
        placeholder="lake/warehouse",
    ),
)

WRITER_FORMAT = "ICEBERG"


def catalog_uri(uri: str, data_dir: str | Path) -> str:
    """The SQL catalog URL as the pipeline gets it: a relative SQLite path is made absolute under
    FLOWPORT_DATA_DIR (like a files node's root)."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        path, sep, query = uri[len(prefix) :].partition("?")
        return f"{prefix}{rooted(path, data_dir)}{sep}{query}"
    return uri


def bind(role: str, node: Mapping[str, str], hop: Hop) -> dict[str, str]:
    """The writer's catalog and warehouse; nothing reads an Iceberg node as a source."""
    if role != DESTINATION:
        return {}
    bound = {}
    if node.get("catalog.uri"):
        bound["writer.iceberg.catalog.uri"] = catalog_uri(node["catalog.uri"], hop.data_dir)
    if node.get("warehouse"):
        bound["writer.iceberg.warehouse"] = hop.rooted(node["warehouse"])
    return bound


KIND = NodeKind(
    name="iceberg",
    fields=FIELDS,
    bind=bind,
    writer_format=WRITER_FORMAT,
    root_key="warehouse",
    table_key="writer.iceberg.table",
    user_properties=("catalog.uri", "warehouse"),
)
