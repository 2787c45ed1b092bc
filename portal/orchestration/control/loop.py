"""One pass of a scheduler process: cron ticks written ahead (when the earliest
cursor's next tick comes within SCHEDULER_LOOKAHEAD_SECONDS, and every
SCHEDULER_POLL_SECONDS to see new and changed flows),
then actions and the outbox (every pass), then the
sweeps for dead workers and silent executors (every few seconds), then the
duties the apps above registered (monitoring's monitors and history metrics,
registered in MonitoringConfig.ready, so orchestration never imports them)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from django.conf import settings
from django.utils import timezone

from portal.flows.refresh import refresh_compilations
from portal.orchestration.control.actions import process_actions
from portal.orchestration.control.liveness import prune_departed_workers, sweep_silent_executors
from portal.orchestration.control.orchestrator import resend_unclaimed, sweep_lost_jobs
from portal.orchestration.control.outbox import relay_outbox
from portal.orchestration.control.scheduler import schedule_due_ticks
from portal.orchestration.control.triggers import check_files, fire_due
from portal.orchestration.state.retention import prune_history

logger = logging.getLogger(__name__)

Result = TypeVar("Result")


@dataclass(frozen=True)
class Duty:
    """Work an app above orchestration wants each scheduler to do, at most
    once per `every()` seconds (read each time, so settings can change)."""

    name: str
    run: Callable[[], object]
    every: Callable[[], float]


_duties: list[Duty] = []

# How often a scheduler looks for cursors the catalog's signal did not keep, in
# the next slice of the catalog (scheduler.reconcile_cursors, RECONCILE_SLICE flows).
RECONCILE_SECONDS = 5.0
RECONCILE_CLEARANCE_SECONDS = 10.0


def register_duty(duty: Duty) -> None:
    if all(known.name != duty.name for known in _duties):
        _duties.append(duty)


class OrchestratorLoop:
    def __init__(
        self, write: Callable[[str], object] = logger.info, clock: Callable[[], datetime] = timezone.now
    ) -> None:
        self.write = write
        self.clock = clock  # the wall clock cron ticks are read against
        self._next_ticks = 0.0
        self._next_due: datetime | None = None
        self._next_reconcile = 0.0
        self._reconcile_from = 0
        self._next_sweep = 0.0
        self._next_prune = 0.0
        self._next_duty: dict[str, float] = {}
        self._started = time.monotonic()

    def _guarded(self, name: str, func: Callable[[], Result]) -> Result | None:
        # One failing part (say the broker is down) must not stop the others.
        try:
            return func()
        except Exception:
            logger.exception("scheduler: %s failed", name)
            return None

    def _wake_at(self) -> datetime | None:
        """When the earliest tick not written yet comes within the look-ahead."""
        if self._next_due is None:
            return None
        return self._next_due - timedelta(seconds=max(0, settings.SCHEDULER_LOOKAHEAD_SECONDS))

    def _cron_ticks(self) -> None:
        """A pass when the earliest unwritten tick comes within the look-ahead (so it
        is written SCHEDULER_LOOKAHEAD_SECONDS before its time, and launched at it),
        or the poll interval is up."""
        now, wall = time.monotonic(), self.clock()
        wake = self._wake_at()
        if now < self._next_ticks and (wake is None or wall < wake):
            return
        # Not just before a pass that writes ticks: the reconciliation's joins would delay it.
        reconcile = now >= self._next_reconcile and (
            wake is None or (wake - wall).total_seconds() > RECONCILE_CLEARANCE_SECONDS
        )
        if reconcile:
            self._next_reconcile = now + RECONCILE_SECONDS
        self._next_ticks = now + settings.SCHEDULER_POLL_SECONDS
        slice_from = self._reconcile_from if reconcile else False
        report = self._guarded("cron ticks", lambda: schedule_due_ticks(wall, reconcile=slice_from))
        self._next_due = report.next_due if report is not None else None
        if reconcile and report is not None:
            self._reconcile_from = report.reconcile_next
        if report is not None and report.created:
            self.write(f"created {report.created} execution(s)")

    def _budget(self, most: float) -> float:
        """Seconds a batched chore may take: up to `most`, but not past the next pass
        that writes ticks."""
        wake = self._wake_at()
        if wake is None:
            return most
        return max(0.0, min(most, (wake - self.clock()).total_seconds()))

    def tick(self) -> None:
        now = time.monotonic()
        self._cron_ticks()
        while self._guarded("actions", process_actions):
            # A burst of launches (a top of the hour) must not hold back the next minute's ticks.
            self._cron_ticks()
        # Data triggers: debounces that are up, source folders due for a look (due rows only).
        self._guarded("data triggers", fire_due)
        self._guarded("file triggers", check_files)
        self._guarded("outbox relay", relay_outbox)
        # After a topology change: the affected flows' verdicts, in batches.
        self._guarded("recompiles", lambda: refresh_compilations(self._budget(1.0)))
        self._cron_ticks()
        if now >= self._next_sweep:
            self._next_sweep = now + max(1, settings.WORKER_HEARTBEAT_SECONDS)
            self._guarded("lost jobs", sweep_lost_jobs)
            self._guarded("unclaimed jobs", resend_unclaimed)
            if now - self._started >= settings.WORKER_LEASE_SECONDS:
                # Workers started beside this scheduler (make run, a host's boot) get a lease's time
                # to beat before their executors are called silent from the last run's heartbeats.
                self._guarded("silent executors", sweep_silent_executors)
            self._guarded("departed workers", prune_departed_workers)
        for duty in _duties:
            if now >= self._next_duty.get(duty.name, 0.0):
                self._next_duty[duty.name] = now + max(1, duty.every())
                self._guarded(duty.name, duty.run)
                self._cron_ticks()
        if now >= self._next_prune:
            self._next_prune = now + max(1, settings.HISTORY_PRUNE_SECONDS)
            self._guarded("history retention", lambda: prune_history(self._budget(1.0)))
