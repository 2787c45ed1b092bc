"""`manage.py run_scheduler`: the scheduler process. Run as many as you like."""

from __future__ import annotations

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from portal.orchestration.scheduler import schedule_due_ticks
from portal.topology.services import load_configured_topology


class Command(BaseCommand):
    help = "Turn due cron ticks of scheduled flows into FlowExecutions, until stopped."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="Make one pass and exit.")

    def handle(self, *args, once: bool = False, **options) -> None:
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        # The immutable TopologyCatalog of the seed: TOPOLOGY_FILE is synced at
        # start-up; a bad file stops the scheduler with file:line: reason.
        if summary := load_configured_topology():
            self.stdout.write(f"topology from {settings.TOPOLOGY_FILE}: {summary}")
        self.stdout.write(f"scheduler started; polling every {settings.SCHEDULER_POLL_SECONDS}s")
        while not stop.is_set():
            report = schedule_due_ticks()
            if report.created:
                self.stdout.write(f"created {report.created} execution(s)")
            if once:
                break
            stop.wait(settings.SCHEDULER_POLL_SECONDS)
        self.stdout.write("scheduler stopped")
