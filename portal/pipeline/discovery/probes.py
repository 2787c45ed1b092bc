"""Each node kind's probe, by the kind's registered name (`nodekinds.KINDS`): what the portal's
Test connection and discovery ask (`topology.connections`)."""

from __future__ import annotations

from portal.pipeline.discovery import files as files_probe
from portal.pipeline.discovery import iceberg as iceberg_probe
from portal.pipeline.discovery import jdbc as jdbc_probe
from portal.pipeline.discovery.shapes import Probe
from portal.pipeline.nodekinds import files, iceberg, jdbc

PROBES: dict[str, Probe] = {
    files.KIND.name: files_probe.PROBE,
    jdbc.KIND.name: jdbc_probe.PROBE,
    iceberg.KIND.name: iceberg_probe.PROBE,
}


def probe_for(kind_name: str) -> Probe | None:
    """How the portal tests and discovers a node of that kind; None: only the workers reach it."""
    return PROBES.get(kind_name)
