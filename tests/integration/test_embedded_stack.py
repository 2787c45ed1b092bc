"""The `make run` stack on embedded defaults: SQLite, a serverless broker,
web + worker + scheduler under honcho. A person logs in over HTTP, creates a
flow through the API, reads it back, and Ctrl-C stops everything cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def embedded_env(var_dir: Path, port: int) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(
        FLOWPORT_VAR_DIR=str(var_dir),
        FLOWPORT_BIND=f"127.0.0.1:{port}",
        SCHEDULER_POLL_SECONDS="1",
        WEB_WORKERS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def wait_for(url: str, process: subprocess.Popen, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "the stack exited before serving"
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} did not answer within {seconds}s")


def test_the_embedded_stack_serves_a_flow_end_to_end(tmp_path):
    port = free_port()
    env = embedded_env(tmp_path / "var", port)
    for command in (["migrate", "--noinput"], ["load_demo"]):
        subprocess.run(
            [sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True, capture_output=True
        )
    log_path = tmp_path / "stack.log"
    with log_path.open("w") as log:
        stack = subprocess.Popen(
            [str(VENV_BIN / "honcho"), "start", "-f", "Procfile"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{base}/login/", stack)
        session = requests.Session()
        session.get(f"{base}/login/", timeout=10)
        password = (tmp_path / "var" / "demo-admin-password").read_text().strip()
        login = session.post(
            f"{base}/login/",
            data={
                "username": "admin",
                "password": password,
                "csrfmiddlewaretoken": session.cookies["csrftoken"],
            },
            headers={"Referer": f"{base}/login/"},
            allow_redirects=False,
            timeout=10,
        )
        assert login.status_code == 302, login.text[:500]

        headers = {"X-CSRFToken": session.cookies["csrftoken"], "Referer": f"{base}/"}
        body = {"flowGroup": "smoke", "flowName": "first", "schedule": "0 3 * * *", "properties": {"a": "b"}}
        created = session.post(f"{base}/api/flowconfigs", json=body, headers=headers, timeout=10)
        assert created.status_code == 201, created.text[:500]
        fetched = session.get(f"{base}/api/flowconfigs/smoke/first", timeout=10).json()
        assert fetched["properties"] == {"a": "b"} and fetched["owner"] == "admin"
        assert session.get(f"{base}/api/flowconfigs/demo/orders-to-archive", timeout=10).status_code == 200

        deadline = time.monotonic() + 60
        while "ready." not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        os.killpg(stack.pid, signal.SIGINT)  # what Ctrl-C sends to the terminal's group
        try:
            stack.wait(timeout=45)
        except subprocess.TimeoutExpired:
            os.killpg(stack.pid, signal.SIGKILL)
            raise
    output = log_path.read_text()
    assert "scheduler started" in output and "scheduler stopped" in output, output[-3000:]
    assert "celery@" in output and "ready." in output, output[-3000:]
    assert "Booting worker" in output, output[-3000:]
    for process in ("web.1", "worker.1", "scheduler.1"):
        assert f"{process} stopped" in output, output[-3000:]
    assert stack.returncode == 130, output[-3000:]  # honcho's exit status after Ctrl-C
