"""What a worker process can take on right now: is its Celery consumer
reading the broker, how many job threads does it have, which are busy, which
are gone (a pool thread that died) and which are wedged (a thread still
inside a job that finished elsewhere, moved on, or was cancelled and did not
stop). The heartbeat reports it, and executor health is made from it, so an
executor is HEALTHY only while some worker consumes its queue with a free
job thread, and BUSY while every usable thread runs a live job (otherwise a
worker whose threads were gone would be reported healthy while jobs waited)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from portal.orchestration.models import JobExecution, JobStatus


@dataclass
class Slot:
    job_id: int
    attempt: int
    thread: str
    since: float = field(default_factory=time.monotonic)
    stale_since: float | None = None  # when its job was first seen finished, moved on or cancelled
    stale_reason: str = ""


@dataclass
class Capacity:
    consuming: bool
    concurrency: int
    busy: int
    gone: int
    wedged: list[str]
    not_consuming_reason: str = ""
    starting: bool = False  # has not consumed yet: says nothing about its executors

    @property
    def free(self) -> int:
        return max(0, self.concurrency - self.busy - self.gone)

    @property
    def stuck(self) -> int:
        return min(self.concurrency, self.gone + len(self.wedged))

    @property
    def problems(self) -> list[str]:
        found = []
        if not self.consuming:
            found.append(f"not consuming: {self.not_consuming_reason}")
        if self.gone:
            found.append(f"{self.gone} of {self.concurrency} job thread(s) gone")
        found += [f"job thread wedged: {w}" for w in self.wedged]
        return found


_lock = threading.Lock()
_slots: dict[str, Slot] = {}
_controller: Any = None
_has_consumed = threading.Event()


def attach(controller: Any) -> None:
    """The Celery WorkController of this process (from the worker's start-up signal)."""
    global _controller
    _controller = controller


@contextmanager
def occupied(job_id: int, attempt: int) -> Iterator[None]:
    """Mark the calling job thread busy with one delivery while it runs."""
    name = threading.current_thread().name
    with _lock:
        _slots[name] = Slot(job_id, attempt, name)
    try:
        yield
    finally:
        with _lock:
            _slots.pop(name, None)


def running_jobs() -> list[str]:
    """The deliveries this process's job threads are inside now ("job 7 attempt 2")."""
    with _lock:
        return [f"job {s.job_id} attempt {s.attempt}" for s in _slots.values()]


def _consuming(controller: Any) -> tuple[bool, str]:
    from celery import bootsteps

    consumer = getattr(controller, "consumer", None)
    if consumer is None:
        return False, "the consumer has not started"
    connection = getattr(consumer, "connection", None)
    if connection is None or not connection.connected:
        return False, "no broker connection (reconnecting)"
    if getattr(consumer, "task_consumer", None) is None:
        return False, "not subscribed to its queues"
    if consumer.blueprint.state != bootsteps.RUN:
        return False, "the consumer is stopping"
    return True, ""


def _gone_threads(controller: Any) -> int:
    """Pool threads that died. concurrent.futures keeps a dead thread in its
    set and never starts another in its place, so each is a slot lost."""
    executor = getattr(getattr(controller, "pool", None), "executor", None)
    threads = getattr(executor, "_threads", None) or ()
    return sum(1 for thread in list(threads) if not thread.is_alive())


def _mark_stale(slots: list[Slot], worker: str, now: float) -> None:
    rows = {
        pk: (attempt, status, who, cancel)
        for pk, attempt, status, who, cancel in JobExecution.objects.filter(
            pk__in=[s.job_id for s in slots]
        ).values_list("pk", "attempt", "status", "worker", "cancel_requested")
    }
    for slot in slots:
        row = rows.get(slot.job_id)
        reason = ""
        if row is None:
            reason = "its job was deleted"
        else:
            attempt, status, who, cancel = row
            if attempt != slot.attempt:
                reason = f"its job moved on to attempt {attempt}"
            elif status == JobStatus.RUNNING and who and not who.startswith(worker):
                reason = f"its job runs on {who} now"
            elif status not in (JobStatus.ORCHESTRATED, JobStatus.RUNNING):
                reason = f"its job is {status.lower()} already"
            elif cancel:
                reason = "its job was cancelled and has not stopped"
        if reason and slot.stale_since is None:
            slot.stale_since, slot.stale_reason = now, reason
        elif not reason:
            slot.stale_since, slot.stale_reason = None, ""


def assess(worker: str) -> Capacity:
    """This process's capacity now; one small query for its busy slots."""
    controller = _controller
    concurrency = int(getattr(controller, "concurrency", 0) or 0)
    consuming, why = _consuming(controller) if controller is not None else (False, "not a Celery worker")
    if consuming:
        _has_consumed.set()
    with _lock:
        slots = list(_slots.values())
    now = time.monotonic()
    if slots:
        _mark_stale(slots, worker, now)
    grace = settings.WORKER_WEDGED_SECONDS
    wedged = [
        f"job {s.job_id} attempt {s.attempt} on {s.thread}: {s.stale_reason} "
        f"{int(now - s.stale_since)} s ago and its thread has not returned"
        for s in slots
        if s.stale_since is not None and now - s.stale_since >= grace
    ]
    gone = _gone_threads(controller) if controller is not None else 0
    return Capacity(
        consuming, concurrency, len(slots), gone, wedged, why, starting=not _has_consumed.is_set()
    )
