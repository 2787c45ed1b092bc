"""Which workers are alive, seen from the control plane: executors whose workers went silent
(or that no worker ever consumed) say so and how to start one, queues no live worker consumes are
named, and the heartbeat rows of workers gone for good are pruned. The scheduler's sweeps; the
workers' own heartbeats are `worker.lifesigns`."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from portal.orchestration.models import WorkerHeartbeat
from portal.topology.models import SpecExecutor
from portal.topology.services import record_health

SILENT = "no worker heartbeat since the last check; jobs wait for a worker"
NEVER = "No worker has consumed"


def worker_command(queue: str) -> str:
    """The command that starts a worker for one executor queue (run where
    the portal is installed, with its environment: settings, broker URL)."""
    return f"celery -A portal.celery worker --pool threads --loglevel INFO -Q {queue}"


def _live_heartbeats() -> QuerySet[WorkerHeartbeat]:
    late = timezone.now() - timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS)
    return WorkerHeartbeat.objects.filter(last_seen__gte=late)


def unconsumed(queues: Iterable[str]) -> dict[str, str]:
    """Of these queues, those no live worker consumes now, each with the
    command that starts one. One query over the live workers (a handful)."""
    wanted = set(queues)
    if not wanted:
        return {}
    served: set[str] = set()
    for listed in _live_heartbeats().filter(consuming=True).values_list("queues", flat=True):
        served.update(listed)
    return {queue: worker_command(queue) for queue in sorted(wanted - served)}


def sweep_silent_executors() -> int:
    """Executors whose workers' heartbeats stopped: DEGRADED (the compiler
    still routes there, at a penalty; jobs wait for a worker), whatever the
    last heartbeat said (busy, stuck threads, no broker). Executors no worker
    ever consumed keep their status (a new executor is no topology change)
    but say so, and how to start a worker. Each message is written once."""
    late = timezone.now() - timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS)
    silent = (
        SpecExecutor.objects.filter(last_heartbeat__lt=late)
        .exclude(health_status=SpecExecutor.Health.UNKNOWN)
        .exclude(health_status=SpecExecutor.Health.DEGRADED, health_message__startswith=SILENT)
    )
    changed = 0
    for name, queue in silent.values_list("name", "queue"):
        message = f"{SILENT}. Start a worker for {queue}: {worker_command(queue)}"
        record_health(name, SpecExecutor.Health.DEGRADED, message, heartbeat=False)
        changed += 1
    never = SpecExecutor.objects.filter(enabled=True, last_heartbeat__isnull=True).exclude(
        health_message__startswith=NEVER
    )
    for name, queue, status in never.values_list("name", "queue", "health_status"):
        message = f"{NEVER} {queue} yet: jobs sent here wait. Start one: {worker_command(queue)}"
        record_health(name, status, message, heartbeat=False)
        changed += 1
    return changed


# A worker process that has not beaten for this long has gone for good (a
# restarted one comes back under a new pid); its row only clutters the
# dashboard and grows the table by one per restart.
DEPARTED_AFTER = timedelta(days=7)


def prune_departed_workers() -> int:
    return WorkerHeartbeat.objects.filter(last_seen__lt=timezone.now() - DEPARTED_AFTER).delete()[0]
