"""Ticks written ahead of their time, taken back when their flow changes.

The scheduler writes a tick's execution up to SCHEDULER_LOOKAHEAD_SECONDS
before it comes (control.scheduler). Until then the flow may be paused,
deleted, re-scheduled or unscheduled; each of those withdraws the flow's
upcoming executions (and their LAUNCH actions) in its own transaction, and
puts the flow's cursor back to now, so the scheduler goes on exactly as if
the ticks had never been written: a resume catches up under the flow's
catch-up policy, a new schedule counts from the change.
"""

from __future__ import annotations

from datetime import datetime

from croniter import CroniterBadDateError, croniter
from django.db import transaction
from django.utils import timezone

from portal.orchestration.models import Action, ActionKind, FlowExecution, ScheduleCursor


def withdraw_upcoming(flow_id: int, now: datetime | None = None) -> int:
    """Delete the flow's executions whose tick has not come, with their LAUNCH;
    returns how many. The cursor row is locked first, so a scheduler pass
    writing ticks ahead for the flow at this moment finishes before (and its
    ticks are withdrawn too) or starts after (and sees the change)."""
    now = now or timezone.now()
    with transaction.atomic():
        cursor = ScheduleCursor.objects.select_for_update().filter(flow_id=flow_id).first()
        upcoming = FlowExecution.with_upcoming.upcoming(now).filter(flow_id=flow_id)
        keys = list(upcoming.values_list("flow_group", "flow_name", "execution_id"))
        for group, name, execution_id in keys:
            Action.objects.filter(
                kind=ActionKind.LAUNCH,
                flow_group=group,
                flow_name=name,
                execution_id=execution_id,
                done_at__isnull=True,
            ).delete()
        if keys:
            upcoming.delete()
        if cursor is not None and cursor.last_tick is not None and cursor.last_tick > now:
            # The ticks after now are to be written again (or caught up on resume).
            ScheduleCursor.objects.filter(pk=cursor.pk).update(
                last_tick=now, next_tick=_next_after(cursor.schedule, now)
            )
    return len(keys)


def _next_after(schedule: str, moment: datetime) -> datetime | None:
    tz = timezone.get_default_timezone()
    try:
        following: datetime = croniter(schedule, moment.astimezone(tz)).get_next(datetime)
        return following
    except (CroniterBadDateError, ValueError, KeyError):
        return None  # worked out again by the next pass
