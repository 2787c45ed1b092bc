"""A SpecExecutor worker process's life signs: a heartbeat row, the health
of the executors whose queues it consumes, and a warm SparkSession so the
first job does not pay Spark's start-up."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from portal.orchestration import sparkctx
from portal.orchestration.actions import process_id
from portal.orchestration.models import JobExecution, JobStatus, WorkerHeartbeat
from portal.topology.models import SpecExecutor
from portal.topology.services import record_health

logger = logging.getLogger(__name__)

_stop = threading.Event()
_thread: threading.Thread | None = None


def beat(worker: str, queues: list[str], started) -> list[str]:
    """One heartbeat; returns the names of the executors this worker serves."""
    executors = list(
        SpecExecutor.objects.filter(queue__in=queues, enabled=True).values_list("name", flat=True)
    )
    running = JobExecution.objects.filter(status=JobStatus.RUNNING, worker__startswith=worker).count()
    WorkerHeartbeat.objects.update_or_create(
        worker=worker,
        defaults={
            "executors": executors,
            "queues": queues,
            "running_jobs": running,
            "started": started,
            "last_seen": timezone.now(),
        },
    )
    for name in executors:
        record_health(name, SpecExecutor.Health.HEALTHY, f"worker {worker} is alive")
    return executors


def _warm_up(executors: list[str]) -> None:
    served = list(SpecExecutor.objects.filter(name__in=executors).exclude(spark_master=""))
    masters = sorted({e.spark_master for e in served})
    if len(masters) == 1 and not masters[0].startswith(("yarn", "k8s")):
        # The first executor's Spark settings make the session (static ones
        # such as the event log cannot change later).
        try:
            sparkctx.session_for(masters[0], served[0].spark_conf)
        except Exception:
            logger.exception("could not start the SparkSession for %s", masters[0])
    elif len(masters) > 1:
        logger.warning(
            "this worker serves executors on several Spark masters %s; jobs for all but one fail", masters
        )


def _loop(queues: list[str]) -> None:
    worker, started = process_id(), timezone.now()
    warmed = False
    while not _stop.is_set():
        try:
            close_old_connections()
            executors = beat(worker, queues, started)
            if not warmed:
                warmed = True
                threading.Thread(
                    target=_warm_up, args=(executors,), name="spark-warm-up", daemon=True
                ).start()
        except Exception:
            logger.exception("worker heartbeat failed")
        _stop.wait(settings.WORKER_HEARTBEAT_SECONDS)


def start(queues: list[str]) -> None:
    global _thread
    if _thread is None:
        _stop.clear()
        _thread = threading.Thread(target=_loop, args=(queues,), name="worker-heartbeat", daemon=True)
        _thread.start()


def stop() -> None:
    global _thread
    _stop.set()
    _thread = None


def sweep_silent_executors() -> int:
    """Executors marked healthy by a heartbeat that stopped: DEGRADED (the
    compiler still routes there, at a penalty; jobs wait for a worker)."""
    late = timezone.now() - timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS)
    silent = SpecExecutor.objects.filter(health_status=SpecExecutor.Health.HEALTHY, last_heartbeat__lt=late)
    names = list(silent.values_list("name", flat=True))
    for name in names:
        record_health(
            name, SpecExecutor.Health.DEGRADED, "no worker heartbeat since the last check", heartbeat=False
        )
    return len(names)


# A worker process that has not beaten for this long has gone for good (a
# restarted one comes back under a new pid); its row only clutters the
# dashboard and grows the table by one per restart.
DEPARTED_AFTER = timedelta(days=7)


def prune_departed_workers() -> int:
    return WorkerHeartbeat.objects.filter(last_seen__lt=timezone.now() - DEPARTED_AFTER).delete()[0]
