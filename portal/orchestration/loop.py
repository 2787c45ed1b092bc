"""One pass of a scheduler process: due cron ticks (every
SCHEDULER_POLL_SECONDS), then actions and the outbox (every pass), then the
sweeps for dead workers and silent executors (every few seconds), then the
duties the apps above registered (monitoring's monitors and history metrics,
registered in MonitoringConfig.ready, so orchestration never imports them)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from portal.flows.refresh import refresh_compilations
from portal.orchestration.actions import process_actions
from portal.orchestration.orchestrator import resend_unclaimed, sweep_lost_jobs
from portal.orchestration.outbox import relay_outbox
from portal.orchestration.retention import prune_history
from portal.orchestration.scheduler import schedule_due_ticks
from portal.orchestration.workers import prune_departed_workers, sweep_silent_executors

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Duty:
    """Work an app above orchestration wants each scheduler to do, at most
    once per `every()` seconds (read each time, so settings can change)."""

    name: str
    run: Callable[[], object]
    every: Callable[[], float]


_duties: list[Duty] = []


def register_duty(duty: Duty) -> None:
    if all(known.name != duty.name for known in _duties):
        _duties.append(duty)


class OrchestratorLoop:
    def __init__(self, write: Callable[[str], object] = logger.info) -> None:
        self.write = write
        self._next_ticks = 0.0
        self._next_sweep = 0.0
        self._next_prune = 0.0
        self._next_duty: dict[str, float] = {}

    def _guarded(self, name: str, func: Callable[[], object]) -> object:
        # One failing part (say the broker is down) must not stop the others.
        try:
            return func()
        except Exception:
            logger.exception("scheduler: %s failed", name)
            return None

    def tick(self) -> None:
        now = time.monotonic()
        if now >= self._next_ticks:
            self._next_ticks = now + settings.SCHEDULER_POLL_SECONDS
            report = self._guarded("cron ticks", schedule_due_ticks)
            if report is not None and report.created:
                self.write(f"created {report.created} execution(s)")
        while self._guarded("actions", process_actions):
            pass
        self._guarded("outbox relay", relay_outbox)
        # After a topology change: the affected flows' verdicts, in batches.
        self._guarded("recompiles", refresh_compilations)
        if now >= self._next_sweep:
            self._next_sweep = now + max(1, settings.WORKER_HEARTBEAT_SECONDS)
            self._guarded("lost jobs", sweep_lost_jobs)
            self._guarded("unclaimed jobs", resend_unclaimed)
            self._guarded("silent executors", sweep_silent_executors)
            self._guarded("departed workers", prune_departed_workers)
        for duty in _duties:
            if now >= self._next_duty.get(duty.name, 0.0):
                self._next_duty[duty.name] = now + max(1, duty.every())
                self._guarded(duty.name, duty.run)
        if now >= self._next_prune:
            self._next_prune = now + max(1, settings.HISTORY_PRUNE_SECONDS)
            self._guarded("history retention", prune_history)
