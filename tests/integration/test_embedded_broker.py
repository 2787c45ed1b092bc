"""The embedded broker (SQLite through kombu's SQLAlchemy transport) shared by
every process of `make run`: processes that declare the same queues at the
same moment all go on working, and a worker that starts while the relay is
publishing comes up and consumes every message."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.stack import ROOT, start_worker

QUEUES = [f"executor.race-{n}" for n in range(30)]


def _declare_and_publish(broker_url: str, barrier, queues: list[str]) -> None:
    """One process of the stack: declares each queue and publishes one message
    to it on a fresh connection, as the relay does, in step with the others
    (all first see each queue missing at the same moment)."""
    from kombu import Connection, Exchange, Queue

    from portal import broker

    broker.register()
    for name in queues:
        barrier.wait(timeout=60)
        with Connection(broker_url) as connection:
            queue = Queue(name, Exchange(name, type="direct"), routing_key=name)
            connection.Producer().publish({"queue": name}, routing_key=name, declare=[queue])


def test_processes_declaring_the_same_queues_at_once_all_succeed(tmp_path):
    broker_file = tmp_path / "broker.sqlite3"
    broker_url = f"sqla+sqlite:///{broker_file}"
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(6)
    processes = [
        spawn.Process(target=_declare_and_publish, args=(broker_url, barrier, QUEUES)) for _ in range(6)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    assert [p.exitcode for p in processes] == [0] * 6, "a process died declaring a queue"

    with sqlite3.connect(broker_file) as db:
        queues = db.execute("SELECT name, COUNT(*) FROM kombu_queue GROUP BY name").fetchall()
        messages = db.execute(
            "SELECT q.name, COUNT(*) FROM kombu_message m JOIN kombu_queue q ON q.id = m.queue_id GROUP BY q.name"
        ).fetchall()
    assert sorted(queues) == [(name, 1) for name in sorted(QUEUES)]
    assert sorted(messages) == [(name, 6) for name in sorted(QUEUES)], "a published message was lost"


PUBLISHER = """
import sys, time
from celery import Celery
from portal import broker
broker.register()
app = Celery(broker=sys.argv[1])
queues, count, sent = sys.argv[2].split(","), int(sys.argv[3]), 0
while sent < count:
    for queue in queues:
        with app.connection_for_write() as connection:  # a fresh connection each time, as the relay
            app.send_task("celery.accumulate", args=(sent,), queue=queue, routing_key=queue,
                          connection=connection, producer=app.amqp.Producer(connection))
        sent += 1
print("published", sent, flush=True)
"""


def test_a_worker_starting_while_the_relay_publishes_comes_up_every_time(tmp_path):
    """Three starts of an embedded worker on a new broker file. As soon as the
    worker has printed its banner (it is about to declare its queues), two
    relay-like publishers declare the same queues, in the other order, and
    fill them: every message is consumed and the worker lives on."""
    queues = ["flowport", *(f"executor.spark-{n}" for n in range(15))]
    env = _embedded_env(tmp_path / "var")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    for round_ in range(3):
        broker_url = f"sqla+sqlite:///{tmp_path / f'broker-{round_}.sqlite3'}"
        env["CELERY_BROKER_URL"] = broker_url
        worker = start_worker(f"worker-{round_}", queues, env, tmp_path / "logs", wait_ready=False)
        try:
            worker.wait_for_log("[queues]")
            publishers = [
                subprocess.Popen(
                    [sys.executable, "-c", PUBLISHER, broker_url, ",".join(reversed(queues)), "48"],
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
                for _ in range(2)
            ]
            for publisher in publishers:
                output, _ = publisher.communicate(timeout=120)
                assert publisher.returncode == 0, output
            worker.wait_for_log("ready.")
            _wait_for_count(worker, "succeeded in", 2 * 48)
            assert "IntegrityError" not in worker.log(), worker.log()[-3000:]
            assert worker.alive(), worker.log()[-3000:]
        finally:
            worker.stop()


def _wait_for_count(worker, text: str, count: int, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while worker.log().count(text) < count:
        assert worker.alive(), worker.log()[-3000:]
        assert time.monotonic() < deadline, f"{worker.log().count(text)} of {count} consumed"
        time.sleep(0.5)


def _embedded_env(var_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(FLOWPORT_VAR_DIR=str(var_dir), PYTHONUNBUFFERED="1")
    return env
