"""Integration fixtures: a real Celery worker and a real scheduler process
per test module, on the Redis broker and the test database."""

from __future__ import annotations

from pathlib import Path

import pytest

from portal.topology import services as topology
from tests.builders.queues import INGEST_QUEUE, REPLICATE_QUEUE
from tests.integration.stack import (
    process_env,
    relay_through,
    retry_flush_on_deadlock,
    stack_broker_url,
    start_scheduler,
    start_worker,
)

retry_flush_on_deadlock()


@pytest.fixture(scope="module")
def stack_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("stack")


@pytest.fixture(scope="module")
def broker_url(stack_dir) -> str:
    """The module's own broker, empty: a Redis database of the integration tests' (TEST_REDIS_DB
    gives a concurrent suite, another checkout, its own), or a serverless broker file."""
    return stack_broker_url(stack_dir / "broker", "TEST_REDIS_DB", 10)


@pytest.fixture(autouse=True)
def _relay_through_the_stack_broker(monkeypatch, broker_url):
    relay_through(monkeypatch, broker_url)


@pytest.fixture(scope="module")
def stack_env(django_db_setup, django_db_blocker, stack_dir, broker_url):
    with django_db_blocker.unblock():
        return process_env(stack_dir / "var", broker_url)


@pytest.fixture(scope="module")
def worker(stack_env, stack_dir):
    proc = start_worker("worker", [INGEST_QUEUE, REPLICATE_QUEUE], stack_env, stack_dir / "logs")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def scheduler(stack_env, stack_dir):
    proc = start_scheduler("scheduler", stack_env, stack_dir / "logs")
    yield proc
    proc.stop()


@pytest.fixture
def lake(tmp_path) -> Path:
    """A topology: landing → lake on the ingest executor, lake → archive on
    the replicate executor, with folders under the test's tmp dir."""
    for name in ("landing", "lake", "archive"):
        (tmp_path / name).mkdir()
        topology.create_data_node(
            {"name": name, "kind": "files", "properties": {"path": str(tmp_path / name)}}
        )
    for name, queue, hop in (
        ("ingest", INGEST_QUEUE, ("landing", "lake")),
        ("replicate", REPLICATE_QUEUE, ("lake", "archive")),
    ):
        topology.create_executor(
            {"name": name, "technology": "spark-local", "spark_master": "local[2]", "queue": queue},
            capabilities=[hop],
        )
    return tmp_path
