"""The scheduler: turns cron ticks into FlowExecutions, exactly one per tick.

Several scheduler processes may run (active-active). Each takes the flows'
cursor rows with `SELECT … FOR UPDATE SKIP LOCKED` where the database has it,
and the unique (flow, scheduled_at) constraint settles any remaining race, so
a tick becomes one execution no matter how many schedulers saw it. A tick that
came due while no scheduler ran is handled by the flow's catch-up policy
(`flow.catchUpPolicy`: skip, latest or all).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from croniter import croniter
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from portal.flows.models import FlowConfig
from portal.orchestration.models import FlowExecution, ScheduleCursor

logger = logging.getLogger(__name__)

CATCH_UP_PROPERTY = "flow.catchUpPolicy"
CATCH_UP_POLICIES = ("skip", "latest", "all")


@dataclass
class TickReport:
    created: int = 0
    already_there: int = 0
    missed_skipped: int = 0


def db_epoch_millis() -> int:
    """Execution ids come from the DB clock, so every portal node agrees."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint")
        else:
            cursor.execute("SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)")
        return int(cursor.fetchone()[0])


def create_execution(
    flow: FlowConfig, trigger: str, scheduled_at: datetime | None = None
) -> FlowExecution | None:
    """A new execution with a DB-clock id unique per flow; None if the tick
    already has one (another scheduler got there first)."""
    for _ in range(5):
        try:
            with transaction.atomic():
                return FlowExecution.objects.create(
                    flow=flow,
                    flow_group=flow.flow_group,
                    flow_name=flow.flow_name,
                    execution_id=db_epoch_millis(),
                    scheduled_at=scheduled_at,
                    trigger=trigger,
                )
        except IntegrityError:
            if scheduled_at and FlowExecution.objects.filter(flow=flow, scheduled_at=scheduled_at).exists():
                return None
            # Same millisecond as another execution of this flow: take the next one.
    raise RuntimeError(f"could not allocate an execution id for {flow}")


def _due_ticks(schedule: str, after: datetime, now: datetime, limit: int) -> list[datetime]:
    ticks: list[datetime] = []
    itr = croniter(schedule, after)
    while len(ticks) < limit:
        tick = itr.get_next(datetime)
        if tick > now:
            break
        ticks.append(tick)
    return ticks


def _catch_up(flow: FlowConfig, ticks: list[datetime], now: datetime) -> tuple[list[datetime], int]:
    """Ticks older than one poll interval were missed while no scheduler ran."""
    grace = settings.SCHEDULER_POLL_SECONDS * 2
    recent = [t for t in ticks if (now - t).total_seconds() <= grace]
    missed = [t for t in ticks if t not in recent]
    policy = flow.properties.get(CATCH_UP_PROPERTY, settings.SCHEDULER_DEFAULT_CATCH_UP)
    if policy == "all":
        return ticks, 0
    if policy == "latest" and missed and not recent:
        return missed[-1:], len(missed) - 1
    return recent, len(missed)


def schedule_due_ticks(now: datetime | None = None) -> TickReport:
    """One pass over the scheduled flows; safe to run from many processes."""
    now = now or timezone.now()
    report = TickReport()
    tz = timezone.get_default_timezone()
    flows = FlowConfig.objects.exclude(schedule="").only(
        "id", "schedule", "properties", "flow_group", "flow_name"
    )
    for flow in flows.iterator():
        with transaction.atomic():
            cursor, _ = ScheduleCursor.objects.get_or_create(
                flow=flow, defaults={"schedule": flow.schedule, "last_tick": now}
            )
            locked = ScheduleCursor.objects.select_for_update(skip_locked=True).filter(pk=cursor.pk).first()
            if locked is None:
                continue  # another scheduler is on this flow right now
            if locked.schedule != flow.schedule:
                # A changed schedule starts counting from now, not from the old one.
                locked.schedule, locked.last_tick = flow.schedule, now
                locked.save()
                continue
            ticks = _due_ticks(
                flow.schedule,
                locked.last_tick.astimezone(tz),
                now.astimezone(tz),
                settings.SCHEDULER_MAX_CATCH_UP,
            )
            if not ticks:
                continue
            to_run, skipped = _catch_up(flow, ticks, now)
            report.missed_skipped += skipped
            for tick in to_run:
                if create_execution(flow, FlowExecution.Trigger.SCHEDULE, tick):
                    report.created += 1
                else:
                    report.already_there += 1
            locked.last_tick = ticks[-1]
            locked.save(update_fields=["last_tick", "updated"])
    if report.missed_skipped:
        logger.warning("skipped %d ticks missed while no scheduler ran", report.missed_skipped)
    return report
