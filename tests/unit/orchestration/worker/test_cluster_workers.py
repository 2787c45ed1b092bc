"""Several Celery workers share one Spark standalone master: each worker's
application asks for its executor's share of the cluster instead of every
core; a worker whose application got no executors says so in the executor's
health; a worker told to stop stops, whatever its jobs are doing; task
attempts Spark retries reach the job's log."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

from django.utils import timezone

from portal.orchestration.models import JobExecution, WorkerHeartbeat
from portal.orchestration.state import joblogs
from portal.orchestration.worker import sparkctx
from portal.orchestration.worker.heartbeat import JobHeartbeat
from portal.orchestration.worker.lifesigns import executor_health
from tests.integration.stack import ROOT

QUEUE = "executor.cluster"


def test_a_standalone_application_is_sized_from_its_executor_with_a_default():
    assert sparkctx.cluster_conf("spark://127.0.0.1:7077", {}) == sparkctx.CLUSTER_SIZING
    assert sparkctx.CLUSTER_SIZING["spark.cores.max"] == "2"  # two workers share a four-core cluster
    own = sparkctx.cluster_conf(
        "spark://m:7077", {"spark.cores.max": "6", "spark.executor.memory": "4g", "spark.sql.x": "1"}
    )
    assert own == {
        "spark.cores.max": "6",
        "spark.executor.cores": "1",
        "spark.executor.memory": "4g",
        "spark.sql.x": "1",
    }
    # A local session has this process's cores; yarn and k8s jobs size their own application.
    assert sparkctx.cluster_conf("local[2]", {"spark.sql.x": "1"}) == {"spark.sql.x": "1"}


def test_the_executors_run_this_processs_python_unless_the_executor_names_another(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert sparkctx.executor_python({}) == sys.executable
    assert sparkctx.executor_python({"spark.pyspark.python": "/opt/flowport/bin/python"}) == (
        "/opt/flowport/bin/python"
    )
    monkeypatch.setenv("PYSPARK_PYTHON", "/srv/venv/bin/python")
    assert sparkctx.executor_python({}) == "/srv/venv/bin/python"


def heartbeat(worker: str, problems: str = "") -> WorkerHeartbeat:
    return WorkerHeartbeat(
        worker=worker,
        queues=[QUEUE],
        consuming=True,
        concurrency=2,
        free_slots=2,
        problems=problems,
        started=timezone.now(),
        last_seen=timezone.now(),
    )


def test_workers_whose_applications_hold_no_executors_degrade_their_executor():
    starved = (
        f"Spark application app-1 on spark://m:7077 {sparkctx.NO_EXECUTORS}: the master gave it no cores"
    )
    status, message = executor_health(QUEUE, [heartbeat("host-a:1", starved)])
    assert status == "DEGRADED"
    assert message.startswith(f"No worker consuming {QUEUE} has Spark executors; jobs wait: host-a:1:")
    assert "app-1" in message
    # Another worker on the queue whose application has executors: jobs can run there.
    status, message = executor_health(QUEUE, [heartbeat("host-a:1", starved), heartbeat("host-b:2")])
    assert status == "HEALTHY" and "Troubled workers: host-a:1: Spark application app-1" in message


def test_a_worker_told_to_stop_exits_by_its_deadline_even_with_a_thread_that_never_returns(tmp_path):
    """The process stands for a worker whose job thread hangs in a Spark call (a real non-daemon
    thread that never returns, as warm shutdown would wait for); the deadline ends it."""
    script = textwrap.dedent(
        """
        import os, threading, django
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
        django.setup()
        from portal.orchestration.worker import capacity, lifesigns

        def hung_job():
            with capacity.occupied(7, 2):
                threading.Event().wait()

        threading.Thread(target=hung_job, name="job-thread-1").start()
        lifesigns.exit_after(0.5, 3)
        """
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert time.monotonic() - started < 30
    assert "still running job 7 attempt 2" in done.stderr and "exiting now" in done.stderr


def test_task_attempts_spark_retries_are_told_in_the_job_log_once_each(settings, tmp_path):
    settings.FLOWPORT_LOG_DIR = str(tmp_path)
    log = joblogs.JobLog(9, "sales.orders.1-a-to-b", 1)
    beats = JobHeartbeat(JobExecution(job_name="sales.orders.1-a-to-b", attempt=1), 1, threading.Event(), log)
    for progress in ({"tasks_failed": 0}, {"tasks_failed": 2}, {"tasks_failed": 2}, {"tasks_failed": 3}):
        beats.spark_events(progress)  # a local session (none here) has no executors to lose
    lines = log.path.read_text().splitlines()
    assert [line.split(" ", 2)[1:] for line in lines] == [
        [
            "WARN",
            "2 Spark task attempt(s) failed; Spark runs them again (up to spark.task.maxFailures); 2 so far",
        ],
        [
            "WARN",
            "1 Spark task attempt(s) failed; Spark runs them again (up to spark.task.maxFailures); 3 so far",
        ],
    ]
    log.close()
