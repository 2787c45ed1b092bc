"""Workers that never die and never wedge: a worker rides out a
broker outage and consumes again; whatever a job raises fails that job and
leaves the worker whole; a job that kills every worker it meets fails as a
poison job instead of being redelivered for ever."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse

from portal.orchestration import services
from portal.orchestration.models import ExecutionStatus, JobExecution, JobStatus, WorkerHeartbeat
from portal.topology.models import SpecExecutor
from tests.builders.stack import crash_topology, finished, make_flow, published_ids
from tests.factories import UserFactory
from tests.integration.stack import (
    process_env,
    relay_through,
    start_redis,
    start_scheduler,
    start_worker,
    wait_until,
)

pytestmark = pytest.mark.django_db(transaction=True)

OUTAGE_SECONDS = 15


def _pid(job: JobExecution) -> str:
    return job.worker.split(":")[1]


def _health(name: str) -> tuple[str, str]:
    return tuple(SpecExecutor.objects.filter(name=name).values_list("health_status", "health_message").get())


def test_a_worker_rides_out_a_broker_outage_and_the_same_process_runs_the_next_job(
    tmp_path, stack_dir, monkeypatch
):
    """Redis is killed while a job runs and stays away for 15 s; the job
    commits meanwhile. The worker must not exit (kombu's restore of the
    unacknowledged message used to raise AttributeError: 'hostname'), must
    reconnect when Redis is back, and must run the next job itself."""
    redis_proc, port = start_redis(stack_dir / "logs")
    broker_url = f"redis://127.0.0.1:{port}/0"
    relay_through(monkeypatch, broker_url)
    env = process_env(stack_dir / "var-outage", broker_url)
    crash_topology(tmp_path, "it.brokerloss")
    release = tmp_path / "release"
    flow = make_flow(
        **{"slow.seconds.per.row": "1", "slow.release.file": str(release), "numbers.per.run": "20"}
    )
    worker = start_worker("survivor", ["it.brokerloss"], env, stack_dir / "logs")
    scheduler = start_scheduler("survivor-scheduler", env, stack_dir / "logs")
    try:
        first = services.run_now(flow, user=flow.owner)
        wait_until(
            lambda: JobExecution.objects.filter(execution=first, status=JobStatus.RUNNING).exists(),
            90,
            "the job to run",
        )
        time.sleep(2)
        redis_proc.kill9()
        worker.wait_for_log("Connection to broker lost", timeout=45)
        # Within a few heartbeats (1 s here) the executor says why it cannot start jobs.
        wait_until(lambda: _health("ingest")[0] == "DEGRADED", 15, "the executor to be degraded")
        assert "not consuming: no broker connection" in _health("ingest")[1], _health("ingest")
        release.touch()  # the job finishes while the broker is away
        finished(first, timeout=180)
        time.sleep(OUTAGE_SECONDS)
        assert worker.alive(), f"the worker exited during the outage:\n{worker.log()[-4000:]}"
        redis_proc, _ = start_redis(stack_dir / "logs", port)
        wait_until(lambda: _health("ingest")[0] == "HEALTHY", 60, "the executor to be healthy again")

        second = finished(services.run_now(flow, user=flow.owner), timeout=150)
        assert worker.alive(), worker.log()[-4000:]
    finally:
        scheduler.stop()
        worker.stop()
        redis_proc.stop()
    log = worker.log()
    assert "Unrecoverable error" not in log, log[-4000:]
    assert first.status == ExecutionStatus.COMMITTED, first.message
    assert second.status == ExecutionStatus.COMMITTED, second.message
    # The same worker process ran both jobs.
    assert _pid(first.jobs.get()) == _pid(second.jobs.get()) == str(worker.pid)
    assert published_ids(tmp_path / "lake" / "it" / "numbers-to-lake") == list(range(1, 41))


def test_a_job_that_exits_or_is_interrupted_fails_and_the_worker_stays_whole(
    tmp_path, stack_env, stack_dir, client
):
    """One consumer thread: a job that calls sys.exit() on import and one
    that raises KeyboardInterrupt each fail at once with their message, and
    the same single thread then runs a healthy job."""
    crash_topology(tmp_path, "it.baseexc")
    scheduler = start_scheduler("baseexc-scheduler", stack_env, stack_dir / "logs")
    worker = start_worker("single", ["it.baseexc"], stack_env, stack_dir / "logs", concurrency=1)
    try:
        exiting = make_flow(name="exits", **{"source.class": "tests.integration.exiting_source.Gone"})
        interrupted = make_flow(name="interrupted", **{"interrupt.message": "stop right there"})
        healthy = make_flow(name="healthy")
        results = [finished(services.run_now(f, user=f.owner), timeout=120) for f in (exiting, interrupted)]
        results.append(finished(services.run_now(healthy, user=healthy.owner), timeout=120))
        assert worker.alive()
    finally:
        scheduler.stop()
        worker.stop()
    exited, interrupted_run, healthy_run = results
    job = exited.jobs.get()
    assert (exited.status, job.status, job.attempt) == (ExecutionStatus.FAILED, JobStatus.FAILED, 1)
    assert "SystemExit" in job.message and "exiting_source refuses to load" in job.message, job.message
    # Its log holds the message and the traceback, and its log page shows them first.
    assert "exiting_source.py" in job.log_excerpt, job.log_excerpt  # a frame of the traceback
    assert job.log_excerpt.rstrip().endswith("SystemExit: exiting_source refuses to load"), job.log_excerpt
    client.force_login(exited.flow.owner)
    page = client.get(
        reverse("orchestration:job_log", args=["it", "exits", exited.execution_id, job.job_name])
    ).content.decode()
    error = page.split('data-test="attempt-error"')[1].split("</section>")[0]
    assert "Why attempt 1 failed" in error and "SystemExit: exiting_source refuses to load" in error
    # Its owner is not staff: the frames are folded away (portal.orchestration.redaction).
    assert "[traceback hidden]" in error and "exiting_source.py" not in error
    job = interrupted_run.jobs.get()
    assert (job.status, job.attempt) == (JobStatus.FAILED, 1)
    assert job.message.startswith("KeyboardInterrupt: stop right there"), job.message
    assert healthy_run.status == ExecutionStatus.COMMITTED, healthy_run.message
    assert _pid(healthy_run.jobs.get()) == str(worker.pid)
    assert "WorkerLostError" not in worker.log()


def test_a_job_that_kills_every_worker_fails_as_a_poison_job(tmp_path, stack_env, stack_dir):
    """JOB_MAX_REDELIVERIES=1: the job kills its worker (os._exit), is
    redelivered once, kills the next worker too, and then fails as a poison
    job; a third worker is left alone and runs healthy work."""
    env = {**stack_env, "JOB_MAX_REDELIVERIES": "1"}
    crash_topology(tmp_path, "it.poison")
    scheduler = start_scheduler("poison-scheduler", env, stack_dir / "logs")
    workers = []
    try:
        flow = make_flow(name="poison", **{"hard.exit.code": "3"})
        execution = services.run_now(flow, user=flow.owner)
        for n in range(2):
            victim = start_worker(f"victim-{n}", ["it.poison"], env, stack_dir / "logs")
            workers.append(victim)
            wait_until(lambda v=victim: not v.alive(), 90, f"the poison job to kill worker {n}")
        finished(execution, timeout=60)
        job = execution.jobs.get()
        assert execution.status == ExecutionStatus.FAILED
        assert (job.status, job.attempt, job.redeliveries) == (JobStatus.FAILED, 2, 2)
        assert job.message.startswith("Poison job: its worker stopped heartbeating without reporting"), (
            job.message
        )
        assert "on each of 2 deliveries" in job.message and "JOB_MAX_REDELIVERIES=1" in job.message

        survivor = start_worker("after-poison", ["it.poison"], env, stack_dir / "logs")
        workers.append(survivor)
        healthy = finished(services.run_now(make_flow(name="after"), user=flow.owner), timeout=120)
        assert survivor.alive() and healthy.status == ExecutionStatus.COMMITTED, healthy.message
        execution.jobs.get()  # still one attempt row, nothing redelivered meanwhile
        assert execution.jobs.get().attempt == 2
    finally:
        scheduler.stop()
        for proc in workers:
            proc.stop()


def test_health_tells_busy_wedged_and_free_threads_apart(tmp_path, stack_env, stack_dir, client):
    """One job thread. While a job runs it the executor says it is busy;
    the job is killed but its code ignores cancellation: after
    WORKER_WEDGED_SECONDS the thread is reported wedged and the executor
    UNHEALTHY, on the dashboard and the executor page; once the code lets go
    the thread is free and the executor HEALTHY again."""
    env = {**stack_env, "WORKER_WEDGED_SECONDS": "2"}
    crash_topology(tmp_path, "it.wedge")
    unblock = tmp_path / "unblock"
    scheduler = start_scheduler("wedge-scheduler", env, stack_dir / "logs")
    worker = start_worker("wedgeable", ["it.wedge"], env, stack_dir / "logs", concurrency=1)
    client.force_login(UserFactory(username="sam", is_staff=True))
    try:
        wait_until(
            lambda: _health("ingest")[0] == "HEALTHY", 30, "the idle worker to make its executor healthy"
        )
        assert _health("ingest")[1] == "1 worker(s) consuming it.wedge with 1 free job thread(s)."
        entered = tmp_path / "entered"
        flow = make_flow(
            name="deaf", **{"block.until.file": str(unblock), "block.entered.file": str(entered)}
        )
        execution = services.run_now(flow, user=flow.owner)
        wait_until(lambda: _health("ingest")[0] == "BUSY", 90, "the executor to say it is busy")
        # Killed before its deaf code, a job just stops: wait until it is in there.
        wait_until(entered.exists, 90, "the job to enter the code that ignores cancellation")
        assert _health("ingest") == (
            "BUSY",
            "All 1 usable job thread(s) consuming it.wedge are running jobs; new jobs wait.",
        )
        page = client.get(reverse("topology:executor", args=["ingest"])).content.decode()
        assert 'badge busy">busy<' in page and "used by the compiler" in page
        dashboard = client.get(reverse("monitoring:dashboard")).content.decode()
        assert 'badge busy">busy<' in dashboard and "new jobs wait" in dashboard

        services.kill(execution, user=flow.owner)
        wait_until(lambda: _health("ingest")[0] == "UNHEALTHY", 30, "the wedged thread to be reported")
        message = _health("ingest")[1]
        assert "job thread wedged: job" in message and "its job was cancelled and has not stopped" in message
        row = WorkerHeartbeat.objects.get(worker__endswith=f":{worker.pid}")
        assert (row.consuming, row.concurrency, row.free_slots, row.stuck_slots) == (True, 1, 0, 1)
        dashboard = client.get(reverse("monitoring:dashboard")).content.decode()
        assert "1 stuck" in dashboard and "its job was cancelled and has not stopped" in dashboard
        page = client.get(reverse("topology:executor", args=["ingest"])).content.decode()
        assert 'badge unhealthy">unhealthy<' in page and "job thread wedged" in page

        unblock.touch()
        finished(execution, timeout=90)
        wait_until(lambda: _health("ingest")[0] == "HEALTHY", 30, "the freed thread to make it healthy")
    finally:
        scheduler.stop()
        worker.stop()
    assert execution.status == ExecutionStatus.CANCELLED, (execution.status, execution.message)
