"""The `make run` stack on embedded defaults: SQLite, a serverless broker,
web + worker + scheduler under honcho. A person logs in over HTTP, creates a
flow through the API, reads it back, and Ctrl-C stops everything cleanly."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import requests

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"


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
        # No shop database on the machine's PostgreSQL: each var folder would leave one behind.
        DEMO_POSTGRES_URL="",
    )
    return env


def wait_for(url: str, process: subprocess.Popen, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "the stack exited before serving"
        try:
            if requests.get(url, timeout=10).status_code == 200:
                return
        except (requests.ConnectionError, requests.Timeout):
            pass  # not listening yet, or its first request is still loading the app
        time.sleep(0.5)
    raise AssertionError(f"{url} did not answer within {seconds}s")


def wait_for_demo_execution(db_path: Path, process: subprocess.Popen, seconds: float = 150) -> dict:
    deadline = time.monotonic() + seconds
    row = None
    while time.monotonic() < deadline:
        assert process.poll() is None, "the stack exited"
        with sqlite3.connect(db_path, timeout=10) as db:
            row = db.execute(
                "SELECT id, status, message FROM orchestration_flowexecution "
                "WHERE flow_group='demo' AND flow_name='orders-to-archive' ORDER BY execution_id LIMIT 1"
            ).fetchone()
            if row and row[1] in ("COMMITTED", "FAILED", "CANCELLED", "SKIPPED"):
                jobs = db.execute(
                    "SELECT job_name, status FROM orchestration_jobexecution WHERE execution_id=? ORDER BY hop_index",
                    (row[0],),
                ).fetchall()
                short = [(name.removeprefix("demo.orders-to-archive."), status) for name, status in jobs]
                return {"status": row[1], "message": row[2], "jobs": short}
        time.sleep(1)
    raise AssertionError(f"the demo execution did not finish within {seconds}s: {row}")


def test_the_embedded_stack_serves_a_flow_end_to_end(tmp_path):
    port = free_port()
    env = embedded_env(tmp_path / "var", port)
    for command in (["migrate", "--noinput"], ["load_demo"]):
        subprocess.run(
            [sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True, capture_output=True
        )
    log_path = tmp_path / "stack.log"
    # Append mode: supervisord reopens /dev/stdout for each process's output
    # (append); its own lines go through this descriptor, which must append too.
    with log_path.open("a") as log:
        stack = subprocess.Popen(
            # What `make run` runs: supervisord with the .env loaded by honcho.
            [
                str(VENV_BIN / "honcho"),
                "run",
                str(VENV_BIN / "supervisord"),
                "-c",
                str(ROOT / "deploy" / "supervisord.conf"),
                "-j",
                str(tmp_path / "supervisord.pid"),
            ],
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
        properties = {"a": "b", "source.files.format": "csv"}
        body = {
            "flowGroup": "smoke",
            "flowName": "first",
            "schedule": "0 3 * * *",
            "source": "landing",
            "destinations": ["archive"],
            "properties": properties,
        }
        created = session.post(f"{base}/api/flowconfigs", json=body, headers=headers, timeout=10)
        assert created.status_code == 201, created.text[:500]
        fetched = session.get(f"{base}/api/flowconfigs/smoke/first", timeout=10).json()
        assert fetched["properties"] == properties and fetched["owner"] == "admin"
        assert session.get(f"{base}/api/flowconfigs/demo/orders-to-archive", timeout=10).status_code == 200

        # The demo flow runs on its own (runImmediately): two hops on two
        # executors through the worker, landing → lake → archive.
        demo = wait_for_demo_execution(tmp_path / "var" / "flowport.sqlite3", stack)
        assert demo["status"] == "COMMITTED", demo
        assert demo["jobs"] == [("1-landing-to-lake", "COMMITTED"), ("2-lake-to-archive", "COMMITTED")], demo
        archived = list(
            (tmp_path / "var" / "data" / "archive" / "demo" / "orders-to-archive").rglob("*.parquet")
        )
        assert archived, "the demo flow published nothing to the archive"
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
    assert "received SIGINT indicating exit request" in output, output[-3000:]
    for process in ("web", "worker", "scheduler"):
        assert f"stopped: {process} (exit status 0)" in output, output[-3000:]
    assert "supervisord started" in output and "exited:" not in output, output[-3000:]  # nothing died unasked
    assert "Traceback" not in output, output[output.find("Traceback") - 1500 :][:4000]
