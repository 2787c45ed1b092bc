"""Reading executions, for the status API and the execution pages alike:
who may see and act on an execution, finding one by its flowExecutionId,
and the small facts derived from the rows (epoch-millisecond times, what a
user may do now, a job's progress, the DAG by hop).

Access is the access module's (accounts.access, with the executions' rule
in orchestration.rules): whoever may see a flow sees its executions; whoever
may change it may run it and kill or resume its executions. What a user may
not see is a 404, never a 403.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404
from django.urls import reverse

from portal.accounts import access
from portal.flows.models import FlowConfig
from portal.flows.rules import flow_for
from portal.flows.validators import NAME_PATTERN
from portal.orchestration import sparkui
from portal.orchestration.control.liveness import unconsumed
from portal.orchestration.models import (
    FINISHED_STATUSES,
    JOB_FINISHED,
    Action,
    ActionKind,
    FlowExecution,
    JobExecution,
    JobStatus,
)
from portal.orchestration.state import tries as job_tries

# flowExecutionId is a signed 64-bit column; a larger number cannot name one
# (and would overflow the database driver instead of missing).
MAX_EXECUTION_ID = 2**63 - 1
# Requests a user made that the orchestrator has not handled yet.
USER_REQUESTS = (ActionKind.LAUNCH, ActionKind.KILL, ActionKind.RESUME)
_NAME = re.compile(rf"{NAME_PATTERN}\Z")
ACT_DENIED = "Only the flow's owner or staff can run it or kill or resume its executions."


class AmbiguousExecutionId(Exception):
    """Several flows the user can see have an execution with this id."""

    def __init__(self, execution_id: int, flows: list[str]) -> None:
        self.execution_id, self.flows = execution_id, flows
        super().__init__(
            f"Execution id {execution_id} belongs to {len(flows)} flows ({', '.join(flows)}); "
            "give flowGroup and flowName to choose one."
        )


def _is_name(value: str) -> bool:
    """A flow group or name as the catalog allows them; anything else names
    nothing (and never reaches the database, which may refuse NUL bytes)."""
    return bool(_NAME.match(value))


# --- access ------------------------------------------------------------------------


# The rule is orchestration.rules, decided in accounts.access; these name its uses.


def executions_visible_to(user) -> QuerySet[FlowExecution]:
    return FlowExecution.objects.restrict(user)


def upcoming_of(flow: FlowConfig, limit: int = 3) -> list[FlowExecution]:
    """The flow's ticks written ahead whose time has not come (models.ArrivedExecutions),
    soonest first: its page shows them as upcoming, nothing else shows them at all.
    For a reader who sees the flow."""
    return list(
        FlowExecution.with_upcoming.upcoming()
        .filter(flow=flow)
        .only("id", "flow_id", "scheduled_at", "execution_id")
        .order_by("scheduled_at")[:limit]
    )


def can_run(user, flow: FlowConfig | None) -> bool:
    return flow is not None and access.can(user, access.CHANGE, flow)


def can_act(user, execution: FlowExecution) -> bool:
    """May `user` kill or resume `execution` (and run its flow again)?"""
    return access.can(user, access.CHANGE, execution)


SPARK_UI_STAFF_ONLY = (
    "The Spark UI is for staff: it belongs to the worker's long-lived Spark application and shows "
    "every job that worker ran (other owners' flows, their SQL and the driver's settings), which no "
    "single flow's owner may read."
)


def can_see_spark_ui(user, execution: FlowExecution) -> bool:
    """The Spark UI has no login of its own and shows the worker's whole session — every job the
    worker ran, other owners' too — and nothing in it can be confined to one job: staff only,
    through the portal's proxy (sparkui.py). `execution` is the one the user already sees."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_staff)


def check_can_act(user, execution: FlowExecution) -> None:
    if not can_act(user, execution):
        raise PermissionDenied(ACT_DENIED)


def visible_flow(user, flow_group: str, flow_name: str, action: str = access.VIEW) -> FlowConfig:
    """The flow, or 404 if the user cannot see it; 403 if they see it but may
    not `action` it (run it, act on its executions)."""
    missing = f"No flow {flow_group}/{flow_name}."
    if not (_is_name(flow_group) and _is_name(flow_name)):
        raise Http404(missing)
    action = access.VIEW if action == access.VIEW else access.CHANGE
    return flow_for(user, flow_group, flow_name, action, denied=ACT_DENIED, missing=missing)


# --- finding executions -----------------------------------------------------------------


def _with_jobs(queryset: QuerySet[FlowExecution]) -> QuerySet[FlowExecution]:
    return queryset.prefetch_related("jobs", "jobs__run_states")  # with their tries


def find_execution(
    user,
    execution_id: int,
    flow_group: str | None = None,
    flow_name: str | None = None,
) -> FlowExecution:
    """The execution the user may see with this flowExecutionId (and flow, when
    given). An id is unique per flow only: if flows the user can see share it
    and no flow was given, AmbiguousExecutionId says which flows they are."""
    if not 0 <= execution_id <= MAX_EXECUTION_ID or not all(
        _is_name(name) for name in (flow_group, flow_name) if name
    ):
        raise Http404(f"No execution {execution_id}.")
    queryset = executions_visible_to(user).filter(execution_id=execution_id)
    if flow_group:
        queryset = queryset.filter(flow_group=flow_group)
    if flow_name:
        queryset = queryset.filter(flow_name=flow_name)
    found = list(_with_jobs(queryset.order_by("flow_group", "flow_name"))[:11])
    if not found:
        where = f" of flow {flow_group or '*'}/{flow_name or '*'}" if flow_group or flow_name else ""
        raise Http404(f"No execution {execution_id}{where}.")
    if len(found) > 1:
        raise AmbiguousExecutionId(execution_id, [f"{e.flow_group}/{e.flow_name}" for e in found[:10]])
    return found[0]


def flow_execution(user, flow_group: str, flow_name: str, execution_id: int) -> FlowExecution:
    """One execution by its full key, for the pages."""
    return find_execution(user, execution_id, flow_group, flow_name)


def last_status(user, flow_group: str, flow_name: str) -> FlowExecution:
    """The flow's last execution (GaaS's "last known status of a flow")."""
    if not (_is_name(flow_group) and _is_name(flow_name)):
        raise Http404(f"No flow {flow_group}/{flow_name}.")
    execution = (
        _with_jobs(executions_visible_to(user).filter(flow_group=flow_group, flow_name=flow_name))
        .order_by("-execution_id")
        .first()
    )
    if execution is not None:
        return execution
    if FlowConfig.objects.restrict(user).filter(flow_group=flow_group, flow_name=flow_name).exists():
        raise Http404(f"Flow {flow_group}/{flow_name} has no execution yet.")
    raise Http404(f"No flow {flow_group}/{flow_name}.")


def pending_requests(flow_group: str, flow_name: str, execution_id: int) -> list[str]:
    """LAUNCH/KILL/RESUME requests for this execution not handled yet.

    Read it before the execution whenever both are shown: the orchestrator
    handles a request and changes the execution in one transaction, so a
    request gone from here is then seen in the execution read after it; read
    the other way round, a page could show a cancelled execution with its
    resume already handled, and stop following it."""
    kinds = (
        Action.objects.filter(
            flow_group=flow_group,
            flow_name=flow_name,
            execution_id=execution_id,
            kind__in=USER_REQUESTS,
            done_at__isnull=True,
        )
        .order_by("kind")
        .values_list("kind", flat=True)
        .distinct()
    )
    return list(kinds)


# --- derived facts -------------------------------------------------------------------


def epoch_millis(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


def is_finished(execution: FlowExecution) -> bool:
    return execution.status in FINISHED_STATUSES


def reported_fraction(progress: Any) -> float | None:
    """0..1 from a job's heartbeat record (:func:`portal.pipeline.progress.job_progress`); None when
    there is none yet or the pipeline has not planned its work units."""
    if not isinstance(progress, dict):
        return None
    if progress.get("state") == "UNKNOWN" or progress.get("work_units_total") == 0:
        return None
    try:
        fraction = float(progress["fraction"])
    except (KeyError, TypeError, ValueError):
        return None
    return min(1.0, max(0.0, fraction))


def progress_percent(job: JobExecution) -> int | None:
    """0-100 for the execution page's DAG: 100 once committed; a job that ended otherwise keeps
    the share it reached; None when nothing is known."""
    if job.status == JobStatus.COMMITTED:
        return 100
    fraction = reported_fraction(job.progress)
    return None if fraction is None else round(fraction * 100)


@dataclass
class DagJob:
    job: JobExecution
    children: list[str] = field(default_factory=list)
    percent: int | None = None
    spark_ui: bool = False  # may the reader follow the Spark UI link (can_see_spark_ui)?

    @property
    def finished(self) -> bool:
        return self.job.status in JOB_FINISHED

    @property
    def spark_ui_link(self) -> str:
        """The portal's way to the job's Spark UI, for a reader who may follow it, while the job
        runs (sparkui.proxied_ui)."""
        return spark_ui_path(self.job) if self.spark_ui else ""

    @property
    def spark(self) -> SparkPanel | None:
        return spark_panel(self.job)

    @cached_property
    def tries(self) -> list[job_tries.Try]:
        """Its tries, first first (orchestration.state.tries)."""
        return job_tries.tries_of(self.job)


def spark_ui_path(job: JobExecution) -> str:
    """The proxy's address of `job`'s Spark UI while the job runs on a worker that recorded a web
    address for it; "" otherwise. Whether the reader may follow it is can_see_spark_ui's."""
    if sparkui.recorded_ui(job) is None:
        return ""
    execution = job.execution
    return reverse(
        "orchestration:spark_ui",
        args=[execution.flow_group, execution.flow_name, execution.execution_id, job.job_name],
    )


@dataclass(frozen=True)
class SparkEvent:
    at: datetime | None
    kind: str
    message: str


@dataclass(frozen=True)
class SparkPanel:
    """What the job's page says of the Spark application that ran it (heartbeat.SparkRecord)."""

    application_id: str
    master: str
    state: str  # as the job's page words it
    submitted: bool
    events: list[SparkEvent]
    earlier_events: int


def spark_panel(job: JobExecution) -> SparkPanel | None:
    """The job's Spark panel, from the record its heartbeat kept in its progress; None before a
    worker started the job's Spark session."""
    progress = job.progress if isinstance(job.progress, dict) else {}
    record = progress.get("spark")
    if not isinstance(record, dict) or not (record.get("application_id") or record.get("submitted")):
        return None
    executors = record.get("executors")
    seen = _when(record.get("seen_at"))
    ended = job.status in JOB_FINISHED  # said in the past, as the last heartbeat saw it
    plural = "s" if executors != 1 else ""
    if record.get("submitted"):
        state = f"{'ran' if ended else 'runs'} as an application of its own (spark-submit): its id is in the driver log"
    elif record.get("state") == "WAITING":
        state = (
            "was waiting for executors" if ended else "waiting for executors: the master has given it none"
        )
    elif executors is None:
        state = f"{'ran' if ended else 'running'} in the worker's process (local master)"
    else:
        state = f"{'ran' if ended else 'running'} with {executors} executor{plural}"
    if ended and seen:
        state += f"; its last heartbeat at {seen:%H:%M:%S} UTC"
    events = [
        SparkEvent(
            at=_when(event.get("at")), kind=str(event.get("kind", "")), message=str(event.get("message", ""))
        )
        for event in record.get("events") or []
        if isinstance(event, dict)
    ]
    return SparkPanel(
        application_id=str(record["application_id"]),
        master=str(record.get("master") or ""),
        state=state,
        submitted=bool(record.get("submitted")),
        events=events,
        earlier_events=int(record.get("earlier_events") or 0),
    )


def _when(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


@dataclass
class DagHop:
    index: int
    jobs: list[DagJob]


def dag_by_hop(execution: FlowExecution, *, spark_ui: bool = False) -> list[DagHop]:
    """The execution's jobs grouped by hop, each with its children, parents
    before children (the order the orchestrator dispatches them in); with
    their Spark UI links when `spark_ui` (the reader passed can_see_spark_ui)."""
    jobs = sorted(execution.jobs.prefetch_related("run_states"), key=lambda j: (j.hop_index, j.job_name))
    children: dict[str, list[str]] = {job.job_name: [] for job in jobs}
    for job in jobs:
        for parent in job.parents or []:
            if parent in children:
                children[parent].append(job.job_name)
    hops: dict[int, list[DagJob]] = {}
    for job in jobs:
        hops.setdefault(job.hop_index, []).append(
            DagJob(job=job, children=children[job.job_name], percent=progress_percent(job), spark_ui=spark_ui)
        )
    return [DagHop(index=index, jobs=hop_jobs) for index, hop_jobs in sorted(hops.items())]


@dataclass(frozen=True)
class Unconsumed:
    """A queue that jobs of an execution were sent to and no live worker reads."""

    queue: str
    jobs: list[str]
    command: str  # the celery command that starts a worker for it


def waiting_without_worker(hops: list[DagHop]) -> list[Unconsumed]:
    """The dispatched jobs (ORCHESTRATED: sent, not claimed) whose queue no
    live worker consumes: they would wait in silence."""
    waiting: dict[str, list[str]] = {}
    for hop in hops:
        for node in hop.jobs:
            if node.job.status == JobStatus.ORCHESTRATED and node.job.queue:
                waiting.setdefault(node.job.queue, []).append(node.job.job_name)
    commands = unconsumed(waiting)
    return [Unconsumed(queue, waiting[queue], command) for queue, command in commands.items()]
