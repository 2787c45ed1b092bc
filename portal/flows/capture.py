"""Whether a flow captures changes from its source database's log (``portal.pipeline.sources.cdc``).

Such a flow holds something on the source server between runs: on PostgreSQL a replication slot,
for which the server keeps its write-ahead log until the slot is advanced or dropped. Pausing or
deleting the flow changes what happens to that log, so the pages say so before and after.
"""

from __future__ import annotations

from portal.flows.models import FlowConfig
from portal.pipeline.propertyrules import CDC_SOURCE_CLASS

PAUSED = (
    "Its change capture keeps its place: on a PostgreSQL source the replication slot stays and the "
    "server keeps write-ahead log for it until the flow resumes (or is deleted)."
)
DELETED = (
    "It captures changes from its source's log: deleting it drops its replication slot and "
    "publication on a PostgreSQL source once the deletion commits (a MariaDB binlog keeps nothing "
    "for it). If the server cannot be reached then, the portal's log names the slot to drop by hand."
)


def captures_changes(flow: FlowConfig) -> bool:
    """The flow's first hop reads the cdc source, named in the flow or by one of its templates (as
    compiled); a flow never compiled is judged on its own properties."""
    if flow.properties.get("source.class") == CDC_SOURCE_CLASS:
        return True
    compiled = getattr(flow, "compiled_dag", None)
    jobs = (compiled.dag if compiled is not None else {}).get("jobs", [])
    return any(
        not plan.get("parents") and (plan.get("properties") or {}).get("source.class") == CDC_SOURCE_CLASS
        for plan in jobs
    )
