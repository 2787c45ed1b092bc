"""`manage.py run_scheduler`: the scheduler process. Run as many as you like."""

from __future__ import annotations

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from portal.orchestration.scheduler import schedule_due_ticks


class Command(BaseCommand):
    help = "Turn due cron ticks of scheduled flows into FlowExecutions, until stopped."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="Make one pass and exit.")

    def handle(self, *args, once: bool = False, **options) -> None:
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write(f"scheduler started; polling every {settings.SCHEDULER_POLL_SECONDS}s")
        while not stop.is_set():
            report = schedule_due_ticks()
            if report.created:
                self.stdout.write(f"created {report.created} execution(s)")
            if once:
                break
            stop.wait(settings.SCHEDULER_POLL_SECONDS)
        self.stdout.write("scheduler stopped")
