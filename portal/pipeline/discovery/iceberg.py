"""Test connection and discovery of an Iceberg node: its SQL catalog looked at only (its tables
are not created), with the short timeout, every connection judged where it lands; discovery
lists the tables with their columns and row identity (Iceberg's primary key)."""

from __future__ import annotations

from typing import Any

from portal.pipeline.discovery import shapes
from portal.pipeline.discovery.shapes import (
    Asking,
    Column,
    ConnectionResult,
    Dataset,
    Discovery,
    Probe,
    failure,
    mark_candidates,
)
from portal.pipeline.nodekinds import iceberg as iceberg_kind
from portal.pipeline.nodekinds.kind import rooted


def catalog(asking: Asking) -> Any:
    """The node's SQL catalog, looked at only (its tables are not created), with the short
    timeout; the password is the flow's, typed for the test (a node holds none)."""
    from portal.pipeline.destinations.iceberg import (
        load_catalog,  # pyiceberg and PySpark load only for an Iceberg node
    )

    properties = asking.properties
    uri = iceberg_kind.catalog_uri(properties.get("catalog.uri", ""), asking.data_dir)
    if uri.startswith("postgresql") and "connect_timeout" not in uri:
        uri += ("&" if "?" in uri else "?") + f"connect_timeout={asking.timeout}"
    warehouse = rooted(properties.get("warehouse", ""), asking.data_dir)
    return load_catalog(
        uri,
        asking.password or None,
        warehouse,
        create=False,
        portal=asking.portal,
        what=asking.what,
        bounds=asking.bounds,
    )


def _tables(asking: Asking) -> list[Dataset]:
    found = catalog(asking)
    datasets = []
    for namespace in found.list_namespaces():
        for identifier in found.list_tables(namespace):
            schema = found.load_table(identifier).schema()
            keys = list(schema.identifier_field_names())  # Iceberg's row identity: its primary key
            columns = [
                Column(f.name, str(f.field_type), keys.index(f.name) + 1 if f.name in keys else 0)
                for f in schema.fields
            ]
            datasets.append(Dataset(".".join(identifier), mark_candidates(columns)))
            if len(datasets) >= shapes.DISCOVERY_MAX_FILES:
                return datasets
    return datasets


def test(asking: Asking) -> ConnectionResult:
    try:
        namespaces = [".".join(n) for n in catalog(asking).list_namespaces()]
    except Exception as error:  # a refusal, SQLAlchemy's or the driver's own message
        return ConnectionResult(False, failure(error))
    return ConnectionResult(
        True, f"Connected to the Iceberg catalog; {len(namespaces)} namespace(s).", namespaces
    )


def discover(asking: Asking) -> Discovery:
    try:
        datasets = _tables(asking)
    except Exception as error:
        return Discovery(False, failure(error))
    return Discovery(True, f"{len(datasets)} Iceberg table(s).", datasets)


PROBE = Probe(test=test, discover=discover)
