"""The positions of a change-data-capture flow's other destinations, for one of its jobs.

Each destination of a cdc flow is a job of its own with its own positions in the state store
(:mod:`portal.pipeline.cdc.fanout`); they share the flow's replication slot, which may be released
only up to the lowest of them. The worker reads the other jobs' positions here, from the state
store, and hands them to the pipeline in the JobSpec (it never reads the portal's database).
"""

from __future__ import annotations

from typing import Any

from portal.orchestration.models import JobExecution
from portal.orchestration.state import statestore
from portal.pipeline.cdc.fanout import OTHERS_KEY
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.properties import Properties
from portal.pipeline.sources.cdc import CDC_SOURCE_CLASS, TABLES_KEY


def _tables(props: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(Properties(props).get_list(TABLES_KEY)))


def other_destinations(job: JobExecution, spec: JobSpec) -> dict[str, dict[str, str]]:
    """Job name -> table -> committed position (``""`` for none yet) of the execution's other
    first-hop jobs that read the same cdc source; empty when the job is not such a job or has no
    sibling."""
    if spec.props.get("source.class") != CDC_SOURCE_CLASS:
        return {}
    found: dict[str, dict[str, str]] = {}
    siblings = JobExecution.objects.filter(execution_id=job.execution_id).exclude(pk=job.pk)
    for name, parents, stored in siblings.values_list("job_name", "parents", "spec"):
        props = (stored or {}).get("properties") or {}
        if parents or name == spec.job_name or props.get("source.class") != CDC_SOURCE_CLASS:
            continue
        marks, _schemas = statestore.previous_state(spec.flow_group, spec.flow_name, name, spec.flow_id)
        found[name] = {table: marks.get(table, "") for table in _tables(props)}
    return found


def hand_over(job: JobExecution, spec: JobSpec) -> dict[str, dict[str, str]]:
    """Put the other destinations' positions in the JobSpec (read now: they only ever grow, so an
    older reading never releases too much); what was put."""
    found = other_destinations(job, spec)
    if found:
        spec.extra[OTHERS_KEY] = found
    else:
        spec.extra.pop(OTHERS_KEY, None)
    return found
