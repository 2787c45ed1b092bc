"""`manage.py run_scheduler`: the scheduler and orchestrator process. Run as
many as you like (active-active): cron ticks, action rows and outbox
messages are all claimed through row locks."""

from __future__ import annotations

import signal
import threading
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from portal.orchestration.control.loop import OrchestratorLoop
from portal.topology.services import load_configured_topology


class Command(BaseCommand):
    help = "Turn due cron ticks into FlowExecutions and run the orchestrator's actions, until stopped."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="Make one pass and exit.")

    def handle(self, *args, once: bool = False, **options) -> None:
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        # As GaaS's immutable TopologyCatalog: TOPOLOGY_FILE is synced at
        # start-up; a bad file stops the scheduler with file:line: reason.
        if summary := load_configured_topology():
            self.stdout.write(f"topology from {settings.TOPOLOGY_FILE}: {summary}")
        self.stdout.write(
            f"scheduler started; ticks every {settings.SCHEDULER_POLL_SECONDS}s, "
            f"actions every {settings.ORCHESTRATOR_POLL_MILLIS}ms"
        )
        loop = OrchestratorLoop(write=self.stdout.write)
        while not stop.is_set():
            started = time.monotonic()
            close_old_connections()
            loop.tick()
            if once:
                break
            stop.wait(max(0.0, settings.ORCHESTRATOR_POLL_MILLIS / 1000 - (time.monotonic() - started)))
        self.stdout.write("scheduler stopped")
