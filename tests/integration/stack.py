"""Real processes for integration tests: Celery workers, scheduler processes,
a private redis-server, a Spark standalone cluster. Each runs against the
pytest-django test database (PostgreSQL, or the SQLite file of the suite's
embedded pass) so the test sees their rows."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import connection

from tests.ports import free_port, own_redis_url

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"


def retry_flush_on_deadlock() -> None:
    """Live worker and scheduler processes keep writing heartbeats while a
    transactional test's tables are truncated; PostgreSQL may pick the
    TRUNCATE as the victim of a deadlock with them. Flushing again is then
    correct. Idempotent: both the integration and browser tests call it."""
    from django.core.management.base import CommandError
    from django.test import testcases

    original = testcases.TransactionTestCase._fixture_teardown
    if getattr(original, "retries_deadlocks", False):
        return

    def teardown(self):
        for attempt in range(3):
            try:
                return original(self)
            except CommandError:
                if attempt == 2:
                    raise
                time.sleep(0.5)
        return None

    teardown.retries_deadlocks = True
    testcases.TransactionTestCase._fixture_teardown = teardown


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def shared_database_url() -> str:
    """The URL of the database pytest-django created for this run: on SQLite a file
    (tests/conftest.py names it), which the processes open beside the test."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        if not Path(str(s["NAME"])).is_file():
            raise AssertionError(
                f"the processes the tests start must share the test database, but {s['NAME']} is not a file"
            )
        return f"sqlite:///{s['NAME']}"
    if connection.vendor != "postgresql":
        raise AssertionError(
            "tests that start worker processes run on PostgreSQL or SQLite: set DATABASE_URL "
            "(make test does this)"
        )
    user = s.get("USER") or "postgres"
    return f"postgres://{user}@{s.get('HOST') or '127.0.0.1'}:{s.get('PORT') or 5432}/{s['NAME']}"


def embedded_broker() -> bool:
    """Does the suite run on the serverless broker (CELERY_BROKER_URL sqla+…), as `make run` does?"""
    from django.conf import settings

    return str(settings.CELERY_BROKER_URL).startswith(("sqla+", "sqlalchemy+"))


def stack_broker_url(folder: Path, db_variable: str, default_db: int) -> str:
    """An empty broker for the processes of one stack: on the serverless broker a SQLite file of
    its own in `folder`, else the tests' own Redis database (`db_variable`, ports.own_redis_url),
    flushed."""
    if embedded_broker():
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "celery-broker.sqlite3"
        path.unlink(missing_ok=True)
        return f"sqla+sqlite:///{path}"
    import redis

    url = own_redis_url(db_variable, default_db)
    redis.Redis.from_url(url).flushdb()
    return url


def master_key_file() -> str:
    """The test process's master key file, so workers unwrap what it wrapped."""
    from django.conf import settings

    from portal.crypto.master import get_ring

    get_ring()  # creates the embedded key file on first use
    return settings.FLOWPORT_MASTER_KEY_FILE or str(Path(settings.VAR_DIR) / "master-key")


def process_env(var_dir: Path, broker_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_SETTINGS_MODULE", "FLOWPORT_MASTER_KEY"}}
    env.update(
        DATABASE_URL=shared_database_url(),
        CELERY_BROKER_URL=broker_url,
        FLOWPORT_VAR_DIR=str(var_dir),
        WORKER_HEARTBEAT_SECONDS="1",
        WORKER_LEASE_SECONDS="6",
        SCHEDULER_POLL_SECONDS="1",
        ORCHESTRATOR_POLL_MILLIS="100",
        PYTHONUNBUFFERED="1",
        SPARK_LOG_LEVEL="ERROR",
        FLOWPORT_MASTER_KEY_FILE=master_key_file(),
    )
    env.update(extra)
    return env


class Proc:
    """A child process in its own session, its output in a log file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("ab")
        # A restarted process appends to the same file; only what it wrote
        # counts, or a stale "ready" line would pass for a start that failed.
        self._log_start = self._log.tell()
        self.popen = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        with self.log_path.open("rb") as log:
            log.seek(self._log_start)
            return log.read().decode(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 60) -> None:
        def seen() -> bool:
            assert self.alive() or text in self.log(), f"{self.name} exited early:\n{self.log()[-3000:]}"
            return text in self.log()

        try:
            wait_until(seen, timeout, f"{self.name} to log {text!r}")
        except AssertionError as timed_out:  # what it did log instead tells why
            raise AssertionError(f"{timed_out}; its log ends:\n{self.log()[-4000:]}") from None

    def kill9(self) -> None:
        os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)

    def stop(self, timeout: float = 20) -> None:
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)
        self._log.close()


def start_worker(
    name: str,
    queues: list[str],
    env: dict[str, str],
    log_dir: Path,
    concurrency: int = 2,
    wait_ready: bool = True,
) -> Proc:
    proc = Proc(
        name,
        [
            str(VENV_BIN / "celery"),
            "-A",
            "portal.celery",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            str(concurrency),
            "--without-mingle",
            "--without-gossip",
            "--loglevel",
            "INFO",
            "-n",
            f"{name}@%h",
            "-Q",
            ",".join(queues),
        ],
        env,
        log_dir,
    )
    if wait_ready:
        proc.wait_for_log("ready.", timeout=90)
    return proc


def start_scheduler(name: str, env: dict[str, str], log_dir: Path) -> Proc:
    proc = Proc(name, [sys.executable, "manage.py", "run_scheduler"], env, log_dir)
    proc.wait_for_log("scheduler started", timeout=60)
    return proc


def start_redis(log_dir: Path, port: int | None = None) -> tuple[Proc, int]:
    """A private redis-server on a free port (never the machine's shared one)."""
    port = port or free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = Proc(f"redis-{port}", argv, dict(os.environ), log_dir)
    proc.wait_for_log("Ready to accept connections", timeout=20)
    return proc, port


def relay_through(monkeypatch, broker_url: str) -> None:
    """The test process relays the outbox rows it writes (on commit, e.g. by
    run_now) through the broker of the stack under test, as every process of
    one deployment shares its broker. Else it would send them to the broker of
    its own settings, where no worker of the stack listens, before the stack's
    scheduler could claim them."""
    from portal.celery import app
    from portal.orchestration.control import outbox

    monkeypatch.setattr(outbox, "_connection", lambda: app.connection_for_write(broker_url))
