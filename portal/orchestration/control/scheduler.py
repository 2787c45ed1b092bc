"""The scheduler: turns cron ticks into FlowExecutions, exactly one per tick.

Several scheduler processes may run (active-active). Each takes the flows'
cursor rows with `SELECT … FOR UPDATE SKIP LOCKED` where the database has it,
and the unique (flow, scheduled_at) constraint settles any remaining race, so
a tick becomes one execution no matter how many schedulers saw it. A tick that
came due while no scheduler ran is handled by the flow's catch-up policy
(`flow.catchUpPolicy`: skip, latest or all).

A paused flow (FlowConfig.paused) is passed over and its cursor stays where it
was, so on resume the ticks that came due while it was paused are missed ticks
like those of a scheduler outage, and the same catch-up policy decides them.

Ticks are written ahead of their time: a pass also takes the ticks due within
SCHEDULER_LOOKAHEAD_SECONDS and writes their executions with the LAUNCH action
due at the tick, so a top of the hour's tens of thousands of ticks are
committed before it comes and at the tick only the orchestrator's claim
remains. Until its tick such an execution is hidden from everyone but the
scheduler and orchestrator (FlowExecution.objects, models.ArrivedExecutions),
and pausing, deleting or re-scheduling the flow withdraws it (control.upcoming).
Everything decided at launch (overlap, quotas, the plan) is still decided then.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from croniter import CroniterBadDateError, croniter
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from portal.bulk import any_of, insert_rows
from portal.flows import policies as run_policies
from portal.flows.models import FlowConfig
from portal.orchestration.control.actions import ActionKind, enqueue_for
from portal.orchestration.control.upcoming import withdraw_upcoming
from portal.orchestration.models import Action, FlowExecution, ScheduleCursor
from portal.orchestration.state.glance import note_run

logger = logging.getLogger(__name__)

CATCH_UP_PROPERTY = run_policies.CATCH_UP
CATCH_UP_POLICIES = ("skip", "latest", "all")


@dataclass
class TickReport:
    created: int = 0
    # Of those, written ahead of their tick (SCHEDULER_LOOKAHEAD_SECONDS).
    ahead: int = 0
    already_there: int = 0
    missed_skipped: int = 0
    # The earliest tick not written yet (None: no unpaused flow is scheduled), so
    # the loop can wake for it (less the look-ahead) instead of waiting out its poll interval.
    next_due: datetime | None = None
    # Where the loop's next reconciliation slice starts (reconcile_cursors).
    reconcile_next: int = 0


def db_epoch_millis() -> int:
    """Execution ids come from the DB clock, so every portal node agrees."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint")
        else:
            cursor.execute("SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)")
        return int(cursor.fetchone()[0])


def create_execution(
    flow: FlowConfig,
    trigger: str,
    scheduled_at: datetime | None = None,
    *,
    requested_by: str = "",
    backfill: dict[str, dict[str, str | None]] | None = None,
    pinned_version: int | None = None,
    now: datetime | None = None,
) -> FlowExecution | None:
    """A new execution with a DB-clock id unique per flow; None if the tick
    already has one (another scheduler got there first). A tick still to come
    is written ahead: its id, `created` and LAUNCH are its tick's, and its
    flow's last run is noted when it launches, not now. `now`: the
    scheduler's clock (a pass's)."""
    now = now or timezone.now()
    ahead = scheduled_at is not None and scheduled_at > now
    for attempt in range(5):
        try:
            with transaction.atomic():
                execution = FlowExecution.with_upcoming.create(
                    flow=flow,
                    flow_group=flow.flow_group,
                    flow_name=flow.flow_name,
                    execution_id=_execution_id(db_epoch_millis(), scheduled_at) + attempt,
                    scheduled_at=scheduled_at,
                    trigger=trigger,
                    requested_by=requested_by,
                    backfill=backfill or {},
                    pinned_version=pinned_version,
                )
                if ahead and scheduled_at is not None:  # auto_now_add wrote now
                    execution.created = scheduled_at
                    FlowExecution.with_upcoming.filter(pk=execution.pk).update(created=scheduled_at)
                # The orchestrator launches it: the row and its LAUNCH commit together.
                enqueue_for(execution, ActionKind.LAUNCH, due_at=scheduled_at if ahead else None)
                if not ahead:
                    note_run(execution)
                return execution
        except IntegrityError:
            if (
                scheduled_at
                and FlowExecution.with_upcoming.filter(flow=flow, scheduled_at=scheduled_at).exists()
            ):
                return None
            # Same millisecond as another execution of this flow: take the next one.
    raise RuntimeError(f"could not allocate an execution id for {flow}")


def _execution_id(db_millis: int, scheduled_at: datetime | None) -> int:
    """Epoch milliseconds from the DB clock; for a tick written ahead, its tick's
    (so ids keep the order in which executions come due, run-now ones among them)."""
    if scheduled_at is None:
        return db_millis
    return max(db_millis, int(scheduled_at.timestamp() * 1000))


def _due_ticks(schedule: str, after: datetime, horizon: datetime, limit: int) -> list[datetime]:
    """The ticks after `after` up to `horizon` (now plus the look-ahead), at most `limit`."""
    ticks: list[datetime] = []
    itr = croniter(schedule, after)
    while len(ticks) < limit:
        try:
            tick = itr.get_next(datetime)
        except CroniterBadDateError:  # a Quartz year field whose years have passed (flows.schedules)
            break
        if tick > horizon:
            break
        ticks.append(tick)
    return ticks


def _catch_up(policy: str, ticks: list[datetime], now: datetime) -> tuple[list[datetime], int]:
    """Ticks older than one poll interval were missed while no scheduler ran;
    ticks still to come (written ahead) are never missed, and do not count as
    recent either: the policy decides the past as it would without look-ahead."""
    grace = settings.SCHEDULER_POLL_SECONDS * 2
    past = [t for t in ticks if t <= now]
    ahead = [t for t in ticks if t > now]
    recent = [t for t in past if (now - t).total_seconds() <= grace]
    missed = [t for t in past if t not in recent]
    if policy == "all":
        return past + ahead, 0
    if policy == "latest" and missed and not recent:
        return missed[-1:] + ahead, len(missed) - 1
    return recent + ahead, len(missed)


def _missed_any(ticks: list[datetime], now: datetime) -> bool:
    return (now - ticks[0]).total_seconds() > settings.SCHEDULER_POLL_SECONDS * 2


BATCH_SIZE = 2000


def sync_cursor(flow: FlowConfig) -> None:
    """Keep a saved flow's cursor in step with its schedule (called in the
    saving transaction), so a pass reads only due cursors and never joins the
    whole catalog: a new schedule starts counting from now, a changed one is
    worked out again on the next pass, a removed one drops its cursor."""
    if not flow.schedule:
        withdraw_upcoming(flow.pk)
        ScheduleCursor.objects.filter(flow=flow).delete()
        return
    # No last tick yet: the first pass to see it starts counting, as for a flow
    # found by reconcile_cursors.
    cursor, created = ScheduleCursor.objects.get_or_create(flow=flow, defaults={"schedule": flow.schedule})
    if not created and cursor.schedule != flow.schedule:
        # The old schedule's ticks written ahead go; the new one counts from the next pass.
        withdraw_upcoming(flow.pk)
        ScheduleCursor.objects.filter(pk=cursor.pk).update(next_tick=None)


# Flow ids one reconciliation covers: the loop goes round the catalog a slice at a time.
RECONCILE_SLICE = 10_000


def reconcile_cursors(now: datetime, start: int | None = None) -> int:
    """The same, for flows written without the catalog's signal (a bulk load,
    a restore). Joins over the catalog: with `start`, only the slice of
    RECONCILE_SLICE flow ids from the first flow at or after it (from the
    first flow again past the last), so its cost does not grow with the
    catalog. Returns where the next slice starts."""
    flows = FlowConfig.objects.all()
    cursors = ScheduleCursor.objects.all()
    after = start
    if start is not None:
        ids = FlowConfig.objects.order_by("pk").values_list("pk", flat=True)
        first = ids.filter(pk__gte=start).first() or ids.first() or 0
        after = first + RECONCILE_SLICE
        flows = flows.filter(pk__gte=first, pk__lt=after)
        cursors = cursors.filter(flow_id__gte=first, flow_id__lt=after)
    missing = flows.exclude(schedule="").filter(schedule_cursor__isnull=True)
    # A flow paused before its first tick starts counting at its first
    # sight too, so its resume catches up from there under its policy.
    ScheduleCursor.objects.bulk_create(
        [
            ScheduleCursor(flow_id=pk, schedule=sched, last_tick=now)
            for pk, sched in missing.values_list("pk", "schedule")
        ],
        ignore_conflicts=True,
    )
    # Ticks written ahead for a flow paused or unscheduled around the catalog go too.
    stale = FlowExecution.with_upcoming.upcoming(now).filter(Q(flow__paused=True) | Q(flow__schedule=""))
    if start is not None:
        stale = stale.filter(flow_id__gte=first, flow_id__lt=after)
    for flow_id in set(stale.values_list("flow_id", flat=True)):
        withdraw_upcoming(flow_id, now)
    cursors.filter(flow__schedule="").delete()
    cursors.exclude(schedule=F("flow__schedule")).exclude(next_tick=None).update(next_tick=None)
    return after or 0


@dataclass(frozen=True)
class _Tick:
    flow_id: int
    flow_group: str
    flow_name: str
    at: datetime


def _create_ticks(due: list[_Tick], report: TickReport, now: datetime) -> None:
    """All of a batch's executions and LAUNCH actions in two statements (see
    portal.bulk); on any conflict (an id taken in the same millisecond by a
    run-now) fall back to one at a time, which knows how to resolve it.
    A tick still to come gets its tick as id, `created` and LAUNCH due time."""
    if not due:
        return
    base = db_epoch_millis()
    offsets: dict[int, int] = {}
    ids = []
    for tick in due:
        offset = offsets[tick.flow_id] = offsets.get(tick.flow_id, -1) + 1
        ids.append(_execution_id(base, tick.at) + offset)
    groups = [t.flow_group for t in due]
    names = [t.flow_name for t in due]
    comes = [max(now, t.at) for t in due]
    ahead = sum(1 for t in due if t.at > now)
    try:
        with transaction.atomic():
            insert_rows(
                FlowExecution,
                {
                    "flow_id": [t.flow_id for t in due],
                    "flow_group": groups,
                    "flow_name": names,
                    "execution_id": ids,
                    "scheduled_at": [t.at for t in due],
                    "created": comes,
                },
                trigger=FlowExecution.Trigger.SCHEDULE,
            )
            if ahead and connection.vendor != "postgresql":
                # bulk_create's auto_now_add wrote now over `created` (PostgreSQL took it as given).
                FlowExecution.with_upcoming.filter(
                    flow_id__in=[t.flow_id for t in due], scheduled_at__gt=now
                ).update(created=F("scheduled_at"))
            insert_rows(
                Action,
                {"flow_group": groups, "flow_name": names, "execution_id": ids, "due_at": comes},
                kind=ActionKind.LAUNCH,
            )
        report.created += len(due)
        report.ahead += ahead
    except IntegrityError:
        flows = FlowConfig.objects.in_bulk({t.flow_id for t in due})
        for tick in due:
            if create_execution(flows[tick.flow_id], FlowExecution.Trigger.SCHEDULE, tick.at, now=now):
                report.created += 1
                report.ahead += tick.at > now
            else:
                report.already_there += 1


def _next_tick(schedule: str, after: datetime) -> datetime:
    tz = timezone.get_default_timezone()
    following: datetime = croniter(schedule, after.astimezone(tz)).get_next(datetime)
    return following


def schedule_due_ticks(  # noqa: C901
    now: datetime | None = None, *, reconcile: bool | int = True, lookahead: float | None = None
) -> TickReport:
    """One pass over the due cursors; safe to run from many processes.

    Due means due by now plus `lookahead` seconds (SCHEDULER_LOOKAHEAD_SECONDS
    by default): those ticks are written ahead, launched at their time.

    Only cursors whose next tick has come or is to be worked out (index
    lookups) are read, so a pass costs what is due, not the whole catalog
    (`reconcile` adds `reconcile_cursors`' joins: True over the whole catalog,
    a flow id for the slice from there). They go in batches: one
    transaction locks a batch's cursor rows (SKIP LOCKED: another
    scheduler's batch is left to it), creates the due ticks' executions with
    their LAUNCH actions and advances the cursors, so ticks and cursors
    commit together and a dying scheduler loses nothing.
    """
    now = now or timezone.now()
    seconds = settings.SCHEDULER_LOOKAHEAD_SECONDS if lookahead is None else lookahead
    horizon = now + timedelta(seconds=max(0.0, seconds))
    report = TickReport()
    tz = timezone.get_default_timezone()
    if reconcile is True:
        reconcile_cursors(now)
    elif reconcile is not False:
        report.reconcile_next = reconcile_cursors(now, reconcile)
    # Due, or not worked out yet (new, or the flow's schedule changed: see sync_cursor).
    due_now = Q(next_tick__lte=horizon) | Q(next_tick__isnull=True) | ~Q(schedule=F("flow__schedule"))
    # Two reads, not one OR: each uses the next_tick index. A paused flow's
    # cursor waits where it stopped, so on resume its missed ticks follow its
    # catch-up policy; a new flow starts counting when first seen, paused or not.
    unpaused = ScheduleCursor.objects.filter(flow__paused=False)
    flow_ids = sorted(
        set(unpaused.filter(next_tick__lte=horizon).values_list("flow_id", flat=True))
        | set(ScheduleCursor.objects.filter(next_tick__isnull=True).values_list("flow_id", flat=True))
    )
    tick_cache: dict[tuple[str, datetime], list[datetime]] = {}
    next_cache: dict[tuple[str, datetime], datetime] = {}
    for first in range(0, len(flow_ids), BATCH_SIZE):
        chunk = flow_ids[first : first + BATCH_SIZE]
        with transaction.atomic():
            # Tuples, not model instances: a top of the hour reads tens of thousands.
            cursors = list(
                ScheduleCursor.objects.select_for_update(skip_locked=True, of=("self",))
                # The id range, not the ids: one index range, no list of thousands.
                .filter(due_now, flow_id__gte=chunk[0], flow_id__lte=chunk[-1])
                .values_list(
                    "pk",
                    "flow_id",
                    "schedule",
                    "last_tick",
                    "flow__schedule",
                    "flow__paused",
                    "flow__flow_group",
                    "flow__flow_name",
                )
            )
            pending: list[tuple[int, str, str, list[datetime]]] = []
            moves: dict[tuple[str, datetime], list[int]] = defaultdict(list)
            for pk, flow_id, cursor_schedule, last_tick, schedule, paused, group, name in cursors:
                if not schedule:
                    continue  # no longer scheduled: sync_cursor drops its cursor
                if paused and last_tick is not None:  # its cursor waits for resume
                    continue
                if cursor_schedule != schedule or last_tick is None:
                    # A new or changed schedule starts counting from now, not from the old one.
                    moves[(schedule, now)].append(pk)
                    continue
                key = (schedule, last_tick)
                if key not in tick_cache:  # flows mostly share a few schedules and cursors
                    tick_cache[key] = _due_ticks(
                        schedule,
                        last_tick.astimezone(tz),
                        horizon.astimezone(tz),
                        settings.SCHEDULER_MAX_CATCH_UP,
                    )
                ticks = tick_cache[key]
                moves[(schedule, ticks[-1]) if ticks else key].append(pk)
                if ticks:
                    pending.append((flow_id, group, name, ticks))
            # Only a flow with missed ticks needs its catch-up policy (its properties).
            policies = {
                flow_id: run_policies.catch_up(properties)
                for flow_id, properties in FlowConfig.objects.filter(
                    pk__in=[p[0] for p in pending if _missed_any(p[3], now)]
                ).values_list("pk", "properties")
            }
            due: list[_Tick] = []
            for flow_id, group, name, ticks in pending:
                to_run, skipped = _catch_up(policies.get(flow_id, ""), ticks, now)
                report.missed_skipped += skipped
                due.extend(_Tick(flow_id, group, name, tick) for tick in to_run)
            _create_ticks(due, report, now)
            # One UPDATE per (schedule, new tick): usually one per batch.
            for (schedule, last_tick), pks in moves.items():
                if (schedule, last_tick) not in next_cache:
                    next_cache[(schedule, last_tick)] = _next_tick(schedule, last_tick)
                ScheduleCursor.objects.filter(pk__in=any_of(pks)).update(
                    schedule=schedule,
                    last_tick=last_tick,
                    next_tick=next_cache[(schedule, last_tick)],
                    updated=now,
                )
    if report.missed_skipped:
        logger.warning("skipped %d ticks missed while no scheduler ran", report.missed_skipped)
    report.next_due = (
        unpaused.filter(next_tick__isnull=False)
        .order_by("next_tick")
        .values_list("next_tick", flat=True)
        .first()
    )
    return report
