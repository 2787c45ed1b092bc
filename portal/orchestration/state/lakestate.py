"""The state store catches up with Iceberg tables before a job pulls.

An Iceberg destination's commit records the run's watermark in the table itself
(`portal.pipeline.destinations.iceberg`), in the same atomic commit as the rows. When a worker died
between that commit and the state store's check-in, and the commit-step log cannot finish
it (lost, or discarded), the state store is behind: the next run would read those rows
again. Before the pull, a job writing to Iceberg asks its tables for the last commit of each
dataset; one from a later execution than the state store's is checked in (a history row
says so), so the run starts where the table is. A watermark reset by hand keeps the
dataset's execution id, so a reset is never undone here.
"""

from __future__ import annotations

import logging

from portal.orchestration.models import DatasetState
from portal.orchestration.state import statestore
from portal.pipeline import usernode
from portal.pipeline.destinations import iceberg
from portal.pipeline.jobspec import JobSpec

logger = logging.getLogger(__name__)

RECOVERED = "COMMITTED"


def writes_iceberg(properties: dict[str, str]) -> bool:
    return any(
        key.startswith("writer.output.format") and str(value).upper() == iceberg.FORMAT
        for key, value in properties.items()
    )


def catch_up(spec: JobSpec, watermarks: dict[str, str]) -> list[str]:
    """Move ``watermarks`` (and the state store) to the Iceberg tables' later commits; returns one
    line per dataset moved, for the job's log."""
    properties = spec.properties
    if not writes_iceberg(properties):
        return []
    group, name, job = spec.flow_group, spec.flow_name, spec.job_name
    try:
        bounds = usernode.from_spec(spec.extra, "destination")
        committed = iceberg.committed_watermarks(properties, job, f"{group}/{name}", bounds)
    except Exception as exc:  # the commit will say what is wrong with the catalog
        logger.warning("could not read the Iceberg tables' watermarks of %s/%s: %s", group, name, exc)
        return []
    flow_id = statestore.flow_id_for(spec.flow_id, group, name)
    lines = []
    for urn, (execution_id, value) in sorted(committed.items()):
        state = DatasetState.objects.filter(
            flow_id=flow_id, flow_group=group, flow_name=name, job_name=job, dataset_urn=urn
        ).first()
        if state is not None and state.execution_id is not None and state.execution_id >= execution_id:
            continue
        statestore.check_in(
            flow_id=flow_id,
            flow_group=group,
            flow_name=name,
            job_name=job,
            dataset_urn=urn,
            watermark=value,
            execution_id=execution_id,
            status=RECOVERED,
            reason=f"recovered from the Iceberg table: execution {execution_id} committed it there",
        )
        watermarks[urn] = value
        lines.append(f"{urn}: watermark {value} of execution {execution_id} recovered from the Iceberg table")
    return lines
