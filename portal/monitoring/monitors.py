"""The periodic monitors, run from the scheduler loop (`run_monitors`).

The flow SLA monitor computes the expected completion of every unfinished
execution — its deadline (`gobblin.flow.sla.time` / `.timeunit`, default
FLOW_SLA_SECONDS, counted from launch like the orchestrator's
ENFORCE_FLOW_FINISH_DEADLINE action) and, from the flow's recent committed
runs, when it will probably finish — and raises `sla.flow_finish_at_risk`
once per execution when it will probably miss, and `sla.flow_finish_missed`
when the deadline passed and the orchestrator has not already said so. A
failed execution raises `execution.failed` once (Gobblin's SLA monitor also
alerts on failed flows): the orchestrator raises it as the execution ends
(events.outcomes), this check under the same key is the backstop. The job
start deadline is enforced, and its event raised, by the orchestrator itself.
"""

from __future__ import annotations

import functools
import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from portal.events import outcomes, sinks
from portal.events.models import Event
from portal.events.services import raise_event
from portal.flows.policies import flow_sla_seconds
from portal.monitoring import freshness, health, slots
from portal.orchestration.models import Action, ActionKind, ExecutionStatus, FlowExecution

logger = logging.getLogger(__name__)

AT_RISK, MISSED, FAILED = "sla.flow_finish_at_risk", "sla.flow_finish_missed", "execution.failed"
HISTORY_RUNS = 10


def _key(kind: str, execution) -> str:
    return f"{kind}:{execution.flow_group}/{execution.flow_name}#{execution.execution_id}"


def _sla_seconds(execution) -> float:
    try:
        return flow_sla_seconds(execution.flow.properties if execution.flow else {})
    except ValidationError:  # refused on save; a flow stored before the check keeps the default
        return float(settings.FLOW_SLA_SECONDS)


def typical_duration(flow_group: str, flow_name: str) -> timedelta | None:
    """The median duration of the flow's last committed runs, or None."""

    runs = (
        FlowExecution.objects.filter(
            flow_group=flow_group,
            flow_name=flow_name,
            status=ExecutionStatus.COMMITTED,
            started_at__isnull=False,
            ended_at__isnull=False,
        )
        .order_by("-execution_id")
        .values_list("started_at", "ended_at")[:HISTORY_RUNS]
    )
    seconds = [(end - start).total_seconds() for start, end in runs if start and end]  # both, by the filter
    return timedelta(seconds=statistics.median(seconds)) if seconds else None


@dataclass
class Expectation:
    """What the SLA monitor thinks of one unfinished execution."""

    deadline: datetime
    expected_finish: datetime | None
    at_risk: bool
    missed: bool


def expectation(execution, now: datetime, *, deadline: datetime | None = None, typical=None) -> Expectation:
    """`deadline`: the execution's ENFORCE_FLOW_FINISH_DEADLINE due time when
    known; `typical`: a callable giving the flow's typical duration (cached
    by the caller across one pass)."""
    sla = timedelta(seconds=_sla_seconds(execution))
    deadline = deadline or execution.created + sla
    usual = (typical or typical_duration)(execution.flow_group, execution.flow_name)
    expected = (execution.started_at or now) + usual if usual else None
    elapsed_share = (now - (deadline - sla)) / sla if sla else 1.0
    at_risk = now < deadline and (
        elapsed_share >= settings.MONITORING_SLA_AT_RISK_FRACTION or bool(expected and expected > deadline)
    )
    return Expectation(deadline, expected, at_risk, now >= deadline)


def check_flow_slas(now: datetime | None = None) -> int:
    """Raise at-risk and missed events for unfinished executions; returns how many were raised."""

    now = now or timezone.now()
    unfinished = list(
        FlowExecution.objects.filter(
            status__in=[ExecutionStatus.PENDING, ExecutionStatus.COMPILED, ExecutionStatus.RUNNING]
        ).select_related("flow")
    )
    deadlines = {
        (group, name, execution_id): due
        for group, name, execution_id, due in Action.objects.filter(
            kind=ActionKind.ENFORCE_FLOW_FINISH_DEADLINE,
            execution_id__in={execution.execution_id for execution in unfinished},
        )
        .order_by("due_at")
        .values_list("flow_group", "flow_name", "execution_id", "due_at")
    }
    grace = timedelta(seconds=settings.MONITORING_SLA_GRACE_SECONDS)
    typical = functools.cache(typical_duration)
    raised = 0
    for execution in unfinished:
        key = (execution.flow_group, execution.flow_name, execution.execution_id)
        seen = expectation(execution, now, deadline=deadlines.get(key), typical=typical)
        where: dict[str, Any] = {
            "flow_group": execution.flow_group,
            "flow_name": execution.flow_name,
            "execution_id": execution.execution_id,
        }
        if seen.at_risk:
            if seen.expected_finish and seen.expected_finish > seen.deadline:
                why = f"its usual duration puts the finish at {seen.expected_finish:%Y-%m-%d %H:%M:%S %Z}"
            else:
                why = f"{settings.MONITORING_SLA_AT_RISK_FRACTION:.0%} of its SLA has passed"
            message = (
                f"{execution} may miss its SLA deadline {seen.deadline:%Y-%m-%d %H:%M:%S %Z}: {why} "
                f"(status {execution.status})."
            )
            raised += bool(raise_event(AT_RISK, message, dedupe_key=_key(AT_RISK, execution), **where))
        elif seen.missed and now >= seen.deadline + grace:
            # Normally the orchestrator's deadline action said so (and killed it).
            if Event.objects.filter(kind=MISSED, **where).exists():
                continue
            message = (
                f"{execution} did not finish by its SLA deadline {seen.deadline:%Y-%m-%d %H:%M:%S %Z} "
                f"and is still {execution.status.lower()}."
            )
            raised += bool(
                raise_event(
                    MISSED,
                    message,
                    severity=Event.Severity.ERROR,
                    dedupe_key=_key(MISSED, execution),
                    **where,
                )
            )
    return raised


def check_failed_executions(now: datetime | None = None) -> int:
    """One `execution.failed` event per execution that failed recently."""

    now = now or timezone.now()
    since = now - timedelta(seconds=settings.MONITORING_SINK_MAX_AGE_SECONDS)
    raised = 0
    failed = FlowExecution.objects.filter(status=ExecutionStatus.FAILED, ended_at__gte=since)
    for execution in failed.order_by("ended_at")[:200]:
        raised += bool(
            raise_event(
                FAILED,
                f"{execution} failed: {execution.message or 'no message'}",
                severity=Event.Severity.ERROR,
                dedupe_key=outcomes.failure_key(
                    execution.flow_group, execution.flow_name, execution.execution_id, execution.ended_at
                ),
                flow_group=execution.flow_group,
                flow_name=execution.flow_name,
                execution_id=execution.execution_id,
            )
        )
    return raised


@dataclass
class MonitorReport:
    raised: dict[str, int] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)


_next_run = 0.0


def run_monitors(now: datetime | None = None, *, force: bool = False) -> MonitorReport | None:
    """One pass of every monitor, at most every MONITORING_INTERVAL_SECONDS
    per process (call it as often as you like); returns None when skipped.
    One failing monitor does not stop the others, and nothing here raises."""
    global _next_run
    clock = time.monotonic()
    if not force and clock < _next_run:
        return None
    _next_run = clock + settings.MONITORING_INTERVAL_SECONDS
    monitors: dict[str, Callable[[], int]] = {
        "flow SLAs": lambda: check_flow_slas(now),
        "failed executions": lambda: check_failed_executions(now),
        "dataset freshness": lambda: freshness.check_freshness(now),
        "executor health": lambda: health.check_executors(now),
        "broker and Spark masters": lambda: health.check_infrastructure(now, force=force),
        "replication slots": lambda: slots.check_slots(now, force=force),
    }
    report = MonitorReport()
    for name, monitor in monitors.items():
        try:
            report.raised[name] = monitor()
        except Exception:
            logger.exception("monitor %s failed", name)
            report.failed.append(name)
    try:
        sinks.kick()  # events of processes that died before sending
    except Exception:
        logger.exception("could not wake the event sinks")
    return report
