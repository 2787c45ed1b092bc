"""A SpecExecutor worker process's life signs: a heartbeat row, the health
of the executors whose queues it consumes, and a warm SparkSession (with, on
a local master, its pool of Python workers started) so the first job does not
pay Spark's start-up."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from portal.orchestration.control.actions import process_id
from portal.orchestration.models import JobExecution, JobStatus, WorkerHeartbeat
from portal.orchestration.worker import capacity, sparkctx
from portal.pipeline.spark.session import warm_up
from portal.topology.models import SpecExecutor
from portal.topology.services import record_health

logger = logging.getLogger(__name__)

_stop = threading.Event()
_thread: threading.Thread | None = None


def beat(
    worker: str, queues: list[str], started: datetime, state: capacity.Capacity | None = None
) -> list[str]:
    """One heartbeat: this worker's capacity (`state`, else assessed in this
    process), then the health of the executors it serves, from every live
    worker on their queues; returns the names of those executors."""
    executors = list(SpecExecutor.objects.filter(queue__in=queues, enabled=True).values_list("name", "queue"))
    running = JobExecution.objects.filter(status=JobStatus.RUNNING, worker__startswith=worker).count()
    state = state or capacity.assess(worker)
    shortage = sparkctx.executor_shortage()
    problems = [*state.problems, *([shortage] if shortage else [])]
    WorkerHeartbeat.objects.update_or_create(
        worker=worker,
        defaults={
            "executors": [name for name, _ in executors],
            "queues": queues,
            "running_jobs": running,
            "consuming": state.consuming,
            "concurrency": state.concurrency,
            "free_slots": state.free,
            "stuck_slots": state.stuck,
            "problems": "; ".join(problems)[:4000],
            "started": started,
            "last_seen": timezone.now(),
        },
    )
    # A worker still connecting at start-up neither vouches for nor degrades
    # its executors (that would flap them, and a status change recompiles).
    if executors and not state.starting:
        late = timezone.now() - timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS)
        live = list(WorkerHeartbeat.objects.filter(last_seen__gte=late))
        for name, queue in executors:
            status, message = executor_health(queue, [w for w in live if queue in w.queues])
            try:
                record_health(name, status, message)
            except SpecExecutor.DoesNotExist:
                continue  # removed since this beat read the list: the next beat no longer serves it
    return [name for name, _ in executors]


def executor_health(queue: str, workers: list[WorkerHeartbeat]) -> tuple[str, str]:
    """HEALTHY while a worker consumes the queue with a free job thread;
    BUSY while every usable thread of the consuming workers runs a live job
    (jobs wait their turn); DEGRADED when no worker reads the broker, or
    when the Spark applications of all that do hold no executor (jobs
    wait); UNHEALTHY when every thread of the consuming workers is gone or
    wedged (jobs would wait for ever).

    BUSY routes as HEALTHY (SpecExecutor.routing_health), so a job starting
    or ending, which flips the two, is no topology change and recompiles no
    flow."""
    Health = SpecExecutor.Health
    consuming = [w for w in workers if w.consuming]
    troubled = "; ".join(f"{w.worker}: {w.problems}" for w in workers if w.problems)
    suffix = f" Troubled workers: {troubled}" if troubled else ""
    if not consuming:
        return Health.DEGRADED, f"No worker is consuming {queue}: {troubled or 'none is connected'}."
    if all(w.stuck_slots >= w.concurrency for w in consuming):
        return Health.UNHEALTHY, f"No usable job thread on {queue}: {troubled}."
    if all(sparkctx.NO_EXECUTORS in w.problems for w in consuming):
        # Jobs are taken but run nowhere: a cluster that gave the workers' applications no cores.
        return Health.DEGRADED, f"No worker consuming {queue} has Spark executors; jobs wait: {troubled}."
    free = [w for w in consuming if w.free_slots]
    if free:
        slots = sum(w.free_slots for w in free)
        return (
            Health.HEALTHY,
            f"{len(free)} worker(s) consuming {queue} with {slots} free job thread(s).{suffix}",
        )
    total = sum(w.concurrency - w.stuck_slots for w in consuming)
    return (
        Health.BUSY,
        f"All {total} usable job thread(s) consuming {queue} are running jobs; new jobs wait.{suffix}",
    )


def _warm_up(executors: list[str]) -> None:
    served = list(SpecExecutor.objects.filter(name__in=executors).exclude(spark_master=""))
    masters = sorted({e.spark_master for e in served})
    if len(masters) == 1 and not masters[0].startswith(("yarn", "k8s")):
        # The first executor's Spark settings make the session (static ones
        # such as the event log cannot change later).
        try:
            spark = sparkctx.session_for(masters[0], served[0].spark_conf)
            if masters[0].startswith("local"):  # a warm pool of Python workers too
                logger.info("Python worker pool warm in %.1f s", warm_up(spark))
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


def start(queues: list[str], controller: Any = None) -> None:
    global _thread
    if controller is not None:
        capacity.attach(controller)
    if _thread is None:
        _stop.clear()
        _thread = threading.Thread(target=_loop, args=(queues,), name="worker-heartbeat", daemon=True)
        _thread.start()


def stop() -> None:
    global _thread
    _stop.set()
    _thread = None


def exit_after(seconds: float, code: int = 0) -> threading.Thread:
    """Stop this process `seconds` from now if it is still alive. Celery's warm shutdown waits
    for every running job, and a Spark job on a cluster that gives it no cores (or a JVM call
    that hangs) never ends, so a worker told to stop would never stop. Past the deadline the
    process exits as if killed: the jobs it still runs keep no lease and the orchestrator
    starts them again elsewhere (their commits are crash-safe, docs/orchestration.md)."""

    def deadline() -> None:
        time.sleep(seconds)
        running = capacity.running_jobs()
        logger.warning(
            "still running %s %.0f s after being told to stop: exiting now; their leases lapse and "
            "they run again on another worker",
            ", ".join(running) or "nothing (the Spark driver or a thread would not stop)",
            seconds,
        )
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        os._exit(code)

    thread = threading.Thread(target=deadline, name="stop-deadline", daemon=True)
    thread.start()
    return thread
