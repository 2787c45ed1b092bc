"""A flow's outcome alerts, raised the moment an execution ends (inside the
transaction that ends it): a failure, the recovery when the flow's latest
outcome turns good again, and a plain success for those who asked for one.

The flow's latest outcome is a row of its own (FlowOutcome) rather than a
look at the previous execution: a failed execution that a re-run job turns
COMMITTED is its own predecessor, and only a remembered "the flow was last
seen failing" sees it recover. The SLA monitor's failure check stays as a
backstop with the same dedupe key, so a failure is alerted once either way."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.db import IntegrityError, transaction

from portal.events import sinks
from portal.events.models import Event, FlowOutcome
from portal.events.services import raise_event

FAILED = "execution.failed"
RECOVERED = "execution.recovered"
SUCCEEDED = "execution.succeeded"


def failure_key(flow_group: str, flow_name: str, execution_id: int, ended_at: datetime | None) -> str:
    """One failure alert per end of an execution: a re-run that fails again is a new failure."""
    ended = int(ended_at.timestamp() * 1000) if ended_at else 0
    return f"{FAILED}:{flow_group}/{flow_name}#{execution_id}@{ended}"


def _latest(flow_group: str, flow_name: str) -> FlowOutcome | None:
    return FlowOutcome.objects.select_for_update().filter(flow_group=flow_group, flow_name=flow_name).first()


def _turn(
    flow_group: str, flow_name: str, execution_id: int, good: bool, unknown: Callable[[], bool | None]
) -> bool | None:
    """Store the flow's new outcome; returns the one before it (None: none known).
    Two executions of a flow ending at once queue on the row's lock."""
    row = _latest(flow_group, flow_name)
    if row is None:
        previous = unknown()
        try:
            with transaction.atomic():  # a savepoint: the other ender may have created it
                FlowOutcome.objects.create(
                    flow_group=flow_group, flow_name=flow_name, good=good, execution_id=execution_id
                )
            return previous
        except IntegrityError:
            row = _latest(flow_group, flow_name)
            assert row is not None
    previous = row.good
    row.good, row.execution_id = good, execution_id
    row.save(update_fields=["good", "execution_id", "changed"])
    return previous


def execution_ended(
    *,
    flow_group: str,
    flow_name: str,
    execution_id: int,
    committed: bool,
    title: str,
    message: str,
    ended_at: datetime | None,
    previous_if_unknown: Callable[[], bool | None] = lambda: None,
) -> Event | None:
    """Called by the orchestrator when an execution ends COMMITTED or FAILED
    (`title` names it, "sales/orders#17"); returns the event raised, if any.
    `previous_if_unknown` answers "was the flow's last outcome good?" for a
    flow this table has not seen end yet (its history from before)."""
    where = {"flow_group": flow_group, "flow_name": flow_name, "execution_id": execution_id}
    previous = _turn(flow_group, flow_name, execution_id, committed, previous_if_unknown)
    if not committed:
        return raise_event(
            FAILED,
            f"{title} failed: {message or 'no message'}",
            severity=Event.Severity.ERROR,
            dedupe_key=failure_key(flow_group, flow_name, execution_id, ended_at),
            **where,
        )
    ended = int(ended_at.timestamp() * 1000) if ended_at else 0
    if previous is False:
        return raise_event(
            RECOVERED,
            f"{title} committed: the flow's last outcome was a failure. {message}".strip(),
            severity=Event.Severity.INFO,
            dedupe_key=f"{RECOVERED}:{flow_group}/{flow_name}#{execution_id}@{ended}",
            **where,
        )
    # A success nobody asked to hear of is no event: it would fill the dashboard's list.
    if sinks.anyone_wants(SUCCEEDED, flow_group, flow_name):
        return raise_event(
            SUCCEEDED,
            f"{title} committed. {message}".strip(),
            severity=Event.Severity.INFO,
            dedupe_key=f"{SUCCEEDED}:{flow_group}/{flow_name}#{execution_id}@{ended}",
            **where,
        )
    return None
