"""Status at a glance: each flow's last run (state, when, how long, what it
delivered), its next run and a strip of its recent runs, for the flow list a
page at a time; and the flow's last-run columns the list filters by.

Bounded by the page, never by history: the recent runs of a page's flows are
one query (per flow, the top N rows of the execution_flow_newest index, joined
by UNION ALL), the jobs of their last runs one more, whatever the flows' history.
SQLite (the embedded portal) allows no LIMIT in an arm of a UNION, so there each
arm reads its flow's top N ids from the same index in a subquery instead.
The filter reads FlowConfig.last_run_status (indexed), which `note_run` keeps
where executions are created and change status.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from portal.flows.models import FlowConfig
from portal.flows.schedules import next_run_times
from portal.orchestration.models import FINISHED_STATUSES, FlowExecution, JobExecution, delivered

STRIP_LENGTH = 10
# What a strip and a last run show; the DAG and messages stay on the execution page.
_RUN_FIELDS = (
    "id",
    "flow_id",
    "flow_group",
    "flow_name",
    "execution_id",
    "status",
    "trigger",
    "scheduled_at",
    "created",
    "started_at",
    "ended_at",
)
_DELIVERY_FIELDS = (
    "id",
    "execution_id",
    "job_name",
    "parents",
    "status",
    "processed_count",
    "spec",
    "attempt",
)


def note_run(execution: FlowExecution) -> None:
    """Record `execution`'s status as its flow's last run, unless a newer
    execution of the flow is there already (an older run finishing late never
    hides a newer one). One conditional UPDATE, so concurrent runs settle on
    the newest."""
    if execution.flow_id is None:
        return
    FlowConfig.objects.filter(pk=execution.flow_id).filter(
        Q(last_run_id__isnull=True) | Q(last_run_id__lte=execution.execution_id)
    ).update(last_run_id=execution.execution_id, last_run_status=execution.status)


@dataclass
class FlowGlance:
    flow: FlowConfig
    runs: list[FlowExecution] = field(default_factory=list)  # oldest first: newest on the right
    delivered: dict[str, int] = field(default_factory=dict)  # the last run's, by destination
    next_run: datetime | None = None
    # The tries the last run's jobs made before their current ones: a COMMITTED that needed a
    # retry says so (orchestration.state.tries.count_earlier, from the same jobs' query here).
    earlier_tries: int = 0

    @property
    def last(self) -> FlowExecution | None:
        return self.runs[-1] if self.runs else None

    @property
    def last_pruned(self) -> bool:
        """The flow ran, but retention deleted the record of its last run."""
        return self.last is None and bool(self.flow.last_run_status)

    @property
    def last_seconds(self) -> float | None:
        """How long the last run took, or has been running."""
        last = self.last
        if last is None or last.started_at is None:
            return None
        end = last.ended_at or timezone.now()
        return max(0.0, (end - last.started_at).total_seconds())

    @property
    def last_when(self) -> datetime | None:
        last = self.last
        return None if last is None else last.started_at or last.created

    @property
    def delivered_total(self) -> int | None:
        return sum(self.delivered.values()) if self.delivered else None


def recent_runs(flow_ids: Sequence[int], per_flow: int = STRIP_LENGTH) -> dict[int, list[FlowExecution]]:
    """The newest `per_flow` executions of each flow, oldest first, in one query."""
    ids = list(dict.fromkeys(flow_ids))
    if not ids:
        return {}
    arms = [_newest(pk, per_flow) for pk in ids]
    query = arms[0].union(*arms[1:], all=True) if len(arms) > 1 else arms[0]
    runs: dict[int, list[FlowExecution]] = {pk: [] for pk in ids}
    for execution in query:
        runs[execution.flow_id].append(execution)  # type: ignore[index]  # filtered on flow_id above
    for found in runs.values():
        found.sort(key=lambda execution: execution.execution_id)
    return runs


def _newest(flow_id: int, per_flow: int) -> QuerySet[FlowExecution]:
    """One flow's arm of the union: its newest `per_flow` executions, read from the index."""
    newest = FlowExecution.objects.filter(flow_id=flow_id).order_by("-execution_id")
    if connection.features.supports_slicing_ordering_in_compound:
        return newest.only(*_RUN_FIELDS)[:per_flow]
    top = newest.values("pk")[:per_flow]
    return FlowExecution.objects.only(*_RUN_FIELDS).filter(pk__in=top).order_by()


def _jobs_by(executions: Iterable[FlowExecution]) -> dict[int, list[JobExecution]]:
    """The jobs of each execution, with what the glance needs of them, in one query."""
    ids = [execution.pk for execution in executions]
    if not ids:
        return {}
    jobs: dict[int, list[JobExecution]] = {pk: [] for pk in ids}
    for job in JobExecution.objects.filter(execution_id__in=ids).only(*_DELIVERY_FIELDS).order_by():
        jobs[job.execution_id].append(job)
    return jobs


def next_run(flow: FlowConfig) -> datetime | None:
    """When the flow's schedule fires next; None when paused or unscheduled."""
    if flow.paused or not flow.schedule:
        return None
    times = next_run_times(flow.schedule, 1)
    return times[0] if times else None


@dataclass
class PageGlance:
    rows: list[FlowGlance]

    @property
    def live(self) -> bool:
        """Is a run on the page unfinished (so the page keeps itself up to date)?"""
        return any(run.status not in FINISHED_STATUSES for row in self.rows for run in row.runs[-1:])


def for_page(flows: Iterable[FlowConfig], per_flow: int = STRIP_LENGTH) -> PageGlance:
    return PageGlance(for_flows(flows, per_flow))


def for_flows(flows: Iterable[FlowConfig], per_flow: int = STRIP_LENGTH) -> list[FlowGlance]:
    """A page of flows (already restricted to the reader: whoever sees a flow
    sees its executions, orchestration.rules), each with its runs at a glance.
    Two queries, whatever the number of flows on the page or runs per flow."""
    flows = list(flows)
    runs = recent_runs([flow.pk for flow in flows], per_flow)
    lasts = [found[-1] for found in runs.values() if found]
    jobs_by = _jobs_by(lasts)
    glances = []
    for flow in flows:
        found = runs.get(flow.pk, [])
        jobs = jobs_by.get(found[-1].pk, []) if found else []
        glances.append(
            FlowGlance(
                flow=flow,
                runs=found,
                delivered=delivered(jobs) if jobs else {},
                next_run=next_run(flow),
                earlier_tries=sum(max(job.attempt - 1, 0) for job in jobs),
            )
        )
    return glances
