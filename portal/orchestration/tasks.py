"""Celery tasks of the SpecExecutor workers. Thin: the work is in
`orchestration.worker.executor`; the signal handlers keep the worker's heartbeat."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import celeryd_after_setup, worker_shutdown, worker_shutting_down
from django.conf import settings

from portal.orchestration.state.commitstore import FailpointCrash
from portal.orchestration.worker import capacity, executor, lifesigns, sparkctx


@shared_task(name="flowport.run_job", acks_late=True, reject_on_worker_lost=True)
def run_job(job_id: int, attempt: int, jobspec: dict[str, Any]) -> str:
    try:
        with capacity.occupied(job_id, attempt):
            return executor.execute_job(job_id, attempt, jobspec)
    except (Exception, FailpointCrash):
        raise
    except BaseException as exc:
        # execute_job reports a job's own BaseException; one escaping it
        # (while claiming, say) must not reach Celery's thread pool, which
        # counts it as a lost worker and puts the message back for ever.
        raise RuntimeError(f"job {job_id} attempt {attempt}: {type(exc).__name__}: {exc}") from exc


@celeryd_after_setup.connect
def _start_heartbeat(sender: str, instance: Any, **kwargs: Any) -> None:
    lifesigns.start(list(instance.app.amqp.queues.consume_from or {}), instance)


@worker_shutdown.connect
def _stop_heartbeat(**kwargs: Any) -> None:
    lifesigns.stop()
    sparkctx.stop()  # after the running jobs finished (a warm shutdown waits for them)


@worker_shutting_down.connect
def _stop_in_time(sig: str = "", how: str = "", exitcode: int = 0, **kwargs: Any) -> None:
    lifesigns.exit_after(settings.WORKER_STOP_SECONDS, int(exitcode or 0))
