"""Browser tests against the real thing: a gunicorn web process, a Celery
worker and a scheduler process (tests.integration.stack), all on the
pytest-django test database (PostgreSQL, or SQLite in the suite's embedded
pass) and a broker of their own (a Redis database, or the serverless broker's
SQLite file), a real slapd for logging in, and Debian's chromium driven by
Playwright's sync API.

The processes, the directory and the browser are started once for the whole
tests/e2e package (so the worker's Spark starts once); every test gets a
fresh browser context and a flushed database (transactional tests).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import requests
from django.contrib.auth import get_user_model
from playwright.sync_api import sync_playwright

from portal.topology import services as topology
from tests import ldap_server
from tests.builders.queues import E2E_INGEST_QUEUE as INGEST_QUEUE
from tests.builders.queues import IDLE_QUEUE, LATE_QUEUE
from tests.e2e import ui
from tests.integration.stack import (
    VENV_BIN,
    Proc,
    process_env,
    relay_through,
    retry_flush_on_deadlock,
    stack_broker_url,
    start_scheduler,
    start_worker,
    wait_until,
)
from tests.ports import free_port

CHROMIUM = os.environ.get("FLOWPORT_E2E_CHROMIUM", "/usr/bin/chromium")
AXE_SCRIPT = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"


retry_flush_on_deadlock()


# --- processes --------------------------------------------------------------------------


@pytest.fixture(scope="package")
def e2e_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="package")
def directory():
    with ldap_server.LdapServer() as server:
        yield server


@pytest.fixture(scope="package")
def broker_url(e2e_dir) -> str:
    """The browser tests' own broker, empty when they start: a Redis database (TEST_REDIS_DB_E2E
    gives a concurrent suite its own), or a serverless broker file in the SQLite pass."""
    return stack_broker_url(e2e_dir / "broker", "TEST_REDIS_DB_E2E", 13)


@pytest.fixture(autouse=True)
def _relay_through_the_stack_broker(monkeypatch, broker_url):
    relay_through(monkeypatch, broker_url)


@pytest.fixture(scope="package")
def stack_env(django_db_setup, django_db_blocker, e2e_dir, directory, broker_url) -> dict[str, str]:
    with django_db_blocker.unblock():
        return process_env(
            e2e_dir / "var",
            broker_url,
            **ldap_server.env_for(directory),
            LDAP_DIRECTORY_NAME="the Flowport test directory",
            MONITORING_DASHBOARD_REFRESH_SECONDS="1",
            MONITORING_INTERVAL_SECONDS="1",
            # test_subscriptions.py's webhook listens on loopback: the operator allows it.
            MONITORING_WEBHOOK_INTERNAL_HOSTS="127.0.0.1",
            # Users' own databases: on a private server asking for passwords, on a port of its own.
            USER_NODE_DATABASE_HOSTS="127.0.0.1,localhost",
            # Where the web server listens, as `make run BIND=` tells every process: the
            # links in alerts (SITE_URL, derived from it) point at this test's portal.
            FLOWPORT_BIND=f"127.0.0.1:{free_port()}",
        )


def _start_web(env: dict[str, str], log_dir: Path) -> tuple[Proc, str]:
    """gunicorn serving the portal on the free port FLOWPORT_BIND names (not waited for here)."""
    port = int(env["FLOWPORT_BIND"].rpartition(":")[2])
    argv = [
        str(VENV_BIN / "gunicorn"),
        "portal.wsgi",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "2",
        "--threads",
        "4",
        "--access-logfile",
        "-",
    ]
    return Proc("e2e-web", argv, env, log_dir), f"http://127.0.0.1:{port}"


def _wait_for_web(proc: Proc, url: str) -> None:
    def serving() -> bool:
        assert proc.alive(), f"the web server exited:\n{proc.log()[-3000:]}"
        try:
            return requests.get(f"{url}/login/", timeout=10).status_code == 200
        except requests.RequestException:
            return False

    wait_until(serving, 60, "the web server to answer", interval=0.3)


@pytest.fixture(scope="package")
def stack(stack_env, e2e_dir) -> str:
    """Web (gunicorn), a Celery worker (the ingest and late queues; the idle
    queue has none) and a scheduler, all up; yields the web's base URL. The
    web server boots while the worker and scheduler start."""
    logs = e2e_dir / "logs"
    procs: list[Proc] = []
    try:
        web, url = _start_web(stack_env, logs)
        procs.append(web)
        procs.append(start_worker("e2e-worker", [INGEST_QUEUE, LATE_QUEUE], stack_env, logs))
        procs.append(start_scheduler("e2e-scheduler", stack_env, logs))
        _wait_for_web(web, url)
        yield url
    finally:
        for proc in reversed(procs):
            proc.stop()


# --- browser ------------------------------------------------------------------------------


@pytest.fixture(scope="package")
def browser():
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"No chromium at {CHROMIUM}: the browser tests drive Debian's chromium. "
            "`make test` installs it (scripts/install-system-deps.sh test), or `apt-get install chromium`.",
            pytrace=False,
        )
    # Playwright's sync API runs an event loop in this thread; Django's ORM
    # (the tests' own set-up and flushes) refuses to run beside one unless told.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            yield launched
            launched.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="package")
def axe_source() -> str:
    if not AXE_SCRIPT.is_file():
        pytest.fail(
            f"axe-core is missing ({AXE_SCRIPT}). `make test` installs it; "
            "or run `npm ci --prefix tests/e2e`.",
            pytrace=False,
        )
    return AXE_SCRIPT.read_text()


@pytest.fixture
def context(browser, stack):
    ctx = browser.new_context(base_url=stack, viewport={"width": 1280, "height": 900})
    ctx.set_default_timeout(15_000)
    errors: list[str] = []
    ctx.on("page", lambda page: page.on("pageerror", lambda error: errors.append(str(error))))
    yield ctx
    ctx.close()
    assert not errors, f"script errors in the pages: {errors}"


@pytest.fixture
def page(context):
    return context.new_page()


# --- data ---------------------------------------------------------------------------------


@pytest.fixture
def lake(tmp_path) -> Path:
    """Data nodes landing, lake, archive and cold under the test's tmp dir;
    executors "ingest" (landing → lake, a worker consumes its queue) and
    "idle" (landing → cold, no worker). Nothing reaches archive yet."""
    for name in ("landing", "lake", "archive", "cold"):
        (tmp_path / name).mkdir()
        topology.create_data_node(
            {
                "name": name,
                "kind": "files",
                "description": f"The {name} folder",
                "properties": {"path": str(tmp_path / name)},
            }
        )
    for name, queue, hop in (
        ("ingest", INGEST_QUEUE, ("landing", "lake")),
        ("idle", IDLE_QUEUE, ("landing", "cold")),
    ):
        topology.create_executor(
            {"name": name, "technology": "spark-local", "spark_master": "local[2]", "queue": queue},
            capabilities=[hop],
        )
    return tmp_path


@pytest.fixture
def logged_in(page, directory):
    """Log `page` in through the LDAP directory as a user; returns the Django user."""

    def log_in(username: str):
        ui.log_in(page, username, ldap_server.PEOPLE[username][0])
        return get_user_model().objects.get(username=username)

    return log_in
