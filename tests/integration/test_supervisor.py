"""`make run` under supervisord (deploy/supervisord.conf): a
process that dies is started again, and Ctrl-C stops all three."""

from __future__ import annotations

import os
import signal
import socket

import pytest

from portal.orchestration.models import WorkerHeartbeat
from tests.integration.stack import ROOT, VENV_BIN, Proc, process_env, wait_until
from tests.ports import free_port

pytestmark = pytest.mark.django_db(transaction=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _heartbeating(pid: int | None) -> int | None:
    """``pid`` once its worker has written a heartbeat (it consumes and runs)."""
    if pid is None:
        return None
    rows = WorkerHeartbeat.objects.values_list("worker", flat=True)
    return pid if any(worker.split(":")[1] == str(pid) for worker in rows) else None


def test_a_killed_worker_comes_back_and_ctrl_c_stops_everything(stack_dir, broker_url, tmp_path):
    port = free_port()
    env = process_env(
        tmp_path / "var",
        broker_url,
        FLOWPORT_BIND=f"127.0.0.1:{port}",
        WEB_WORKERS="1",
        WORKER_QUEUES="it.supervised",
    )
    pidfile = tmp_path / "supervisord.pid"
    supervisor = Proc(
        "supervisord",
        [str(VENV_BIN / "supervisord"), "-c", str(ROOT / "deploy" / "supervisord.conf"), "-j", str(pidfile)],
        env,
        stack_dir / "logs",
    )
    try:
        supervisor.wait_for_log("success: scheduler entered RUNNING state", timeout=60)
        wait_until(lambda: _listening(port), 60, "the web process to listen")
        # the worker supervisord runs now (on a busy machine it may have been started again)
        first = wait_until(
            lambda: _heartbeating(_spawned(supervisor.log(), "worker")), 90, "the worker's heartbeat"
        )

        os.kill(first, signal.SIGKILL)  # the worker dies
        supervisor.wait_for_log("exited: worker (terminated by SIGKILL", timeout=30)
        second = wait_until(
            lambda: (pid := _heartbeating(_spawned(supervisor.log(), "worker"))) != first and pid,
            90,
            "a new worker process to heartbeat",
        )
        assert _alive(second) and not _alive(first)
        children = [second, *_pids_in_log(supervisor.log(), ("web", "scheduler"))]
        assert all(_alive(pid) for pid in children), children

        os.killpg(supervisor.pid, signal.SIGINT)  # Ctrl-C in the terminal
        supervisor.popen.wait(60)
    finally:
        supervisor.stop()
    log = supervisor.log()
    assert "received SIGINT indicating exit request" in log, log[-3000:]
    for name in ("web", "worker", "scheduler"):
        assert f"stopped: {name}" in log, log[-3000:]
    wait_until(lambda: not any(_alive(pid) for pid in children), 10, "every child to be gone")
    assert not _listening(port)


def _pids_in_log(log: str, names: tuple[str, ...]) -> list[int]:
    """The last pid supervisord spawned for each named program."""
    pids = {}
    for line in log.splitlines():
        if "INFO spawned: '" in line:
            name = line.split("spawned: '")[1].split("'")[0]
            pids[name] = int(line.rsplit("pid ", 1)[1])
    return [pids[name] for name in names]


def _spawned(log: str, name: str) -> int | None:
    found = [
        pid
        for line in log.splitlines()
        if f"INFO spawned: '{name}'" in line
        for pid in [int(line.rsplit("pid ", 1)[1])]
    ]
    return found[-1] if found else None
