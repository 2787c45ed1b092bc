"""One pass of a scheduler process: due cron ticks (every
SCHEDULER_POLL_SECONDS), then actions and the outbox (every pass), then the
sweeps for dead workers and silent executors (every few seconds)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.conf import settings

from portal.flows.refresh import refresh_compilations
from portal.monitoring.metrics import refresh_history_snapshot
from portal.monitoring.monitors import run_monitors
from portal.orchestration.actions import process_actions
from portal.orchestration.orchestrator import resend_unclaimed, sweep_lost_jobs
from portal.orchestration.outbox import relay_outbox
from portal.orchestration.retention import prune_history
from portal.orchestration.scheduler import schedule_due_ticks
from portal.orchestration.workers import prune_departed_workers, sweep_silent_executors

logger = logging.getLogger(__name__)


class OrchestratorLoop:
    def __init__(self, write: Callable[[str], object] = logger.info) -> None:
        self.write = write
        self._next_ticks = 0.0
        self._next_sweep = 0.0
        self._next_prune = 0.0
        self._next_metrics = 0.0

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
            self._guarded("monitors", run_monitors)
        if now >= self._next_metrics:
            self._next_metrics = now + max(1, settings.METRICS_HISTORY_SECONDS)
            self._guarded("history metrics", refresh_history_snapshot)
        if now >= self._next_prune:
            self._next_prune = now + max(1, settings.HISTORY_PRUNE_SECONDS)
            self._guarded("history retention", prune_history)
