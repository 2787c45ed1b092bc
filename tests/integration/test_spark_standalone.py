"""The cluster path: spark-standalone executors run their jobs on a real
Spark standalone master and two Spark workers started from PySpark's
distribution on loopback, through Celery workers whose SparkSessions are
applications of it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pyarrow.parquet as pq
import pyspark
import pytest
from django.contrib.auth import get_user_model

from portal.flows import services as flow_services
from portal.orchestration import services
from portal.orchestration.models import ExecutionStatus, JobExecution, JobStatus
from portal.orchestration.worker.sparkctx import NO_EXECUTORS
from portal.topology import services as topology
from portal.topology.models import SpecExecutor
from tests.builders.stack import finished, make_flow, published_ids
from tests.integration.stack import Proc, start_scheduler, start_worker, wait_until
from tests.ports import free_port

pytestmark = pytest.mark.django_db(transaction=True)

SPARK_HOME = Path(pyspark.__file__).parent
LOOPBACK = {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(SPARK_HOME), "PYSPARK_PYTHON": sys.executable}
ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
ORDERS = 3000
LOST = "lost 1 executor(s), 1 left"  # what the heartbeat says of the killed Spark worker


def master_state(web_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=5) as response:
        return json.load(response)


@dataclass
class Cluster:
    url: str
    web_port: int
    workers: list[Proc]


@pytest.fixture
def spark_cluster(stack_env, stack_dir):
    """A standalone master and two Spark workers of two cores each, on loopback."""
    port, web_port = free_port(), free_port()
    # The Spark workers' application folders (executor logs, fetched jars) go with the stack's.
    env = {**stack_env, **LOOPBACK, "SPARK_WORKER_DIR": str(stack_dir / "spark-work")}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master = Proc(
        "spark-master",
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(web_port),
        ],
        env,
        stack_dir / "logs",
    )
    workers = [
        Proc(
            f"spark-worker-{n}",
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                "--cores",
                "2",
                "--memory",
                "1g",
                "--webui-port",
                str(free_port()),
                f"spark://127.0.0.1:{port}",
            ],
            env,
            stack_dir / "logs",
        )
        for n in (1, 2)
    ]
    try:
        wait_until(
            lambda: _alive_workers(web_port) == 2, 120, "both Spark workers to register with the master"
        )
        yield Cluster(f"spark://127.0.0.1:{port}", web_port, workers)
    finally:
        for worker in workers:
            worker.stop()
        master.stop()


def _alive_workers(web_port: int) -> int:
    try:
        return master_state(web_port)["aliveworkers"]
    except (OSError, ValueError):  # not up yet, or still answering its HTML page (a loaded host)
        return 0


@pytest.fixture
def shop():
    """A PostgreSQL source database of its own: shop.orders."""
    database = f"flowport_cluster_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
    with psycopg.connect(f"postgres://postgres@127.0.0.1:5432/{database}", autocommit=True) as db:
        db.execute("CREATE SCHEMA shop")
        db.execute("CREATE TABLE shop.orders (id int PRIMARY KEY, total numeric(10,2), seq int)")
        db.execute(f"INSERT INTO shop.orders SELECT g, g * 1.5, g FROM generate_series(1, {ORDERS}) g")  # noqa: S608
    yield database
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{database}" WITH (FORCE)')


def _flowport_apps(web_port: int) -> list[dict]:
    return [a for a in master_state(web_port)["activeapps"] if a["name"].startswith("flowport-worker@")]


def _job(execution) -> JobExecution:
    return JobExecution.objects.filter(execution__execution_id=execution.execution_id).get()


def test_two_workers_share_the_cluster_and_a_lost_spark_worker_costs_no_row(
    tmp_path, spark_cluster, stack_env, stack_dir, shop
):
    """Two Celery workers and two schedulers on a standalone master with two Spark workers: each
    worker's application holds its executor's share, a JDBC flow on the Arrow path (the Python
    executors write the Parquet) and a files flow run, and a Spark worker killed mid-job costs
    neither a row nor a duplicate. A third worker the cluster has no cores left for says so on its
    job and its executor, and stops when told to."""
    logs = stack_dir / "logs"
    lake = tmp_path / "lake"
    for name in ("landing", "lake", "late-lake"):
        (tmp_path / name).mkdir()
        topology.create_data_node(
            {"name": name, "kind": "files", "properties": {"path": str(tmp_path / name)}}
        )
    url = f"jdbc:postgresql://127.0.0.1:5432/{shop}"
    topology.create_data_node(
        {"name": "shopdb", "kind": "jdbc", "properties": {"url": url, "user": "postgres"}}
    )
    sizing = {"spark.executor.memory": "512m"}  # two executors of each application fit a Spark worker
    for name, queue, hops in (
        ("cluster", "it.cluster", [("landing", "lake"), ("shopdb", "lake")]),
        ("late", "it.late", [("landing", "late-lake")]),
    ):
        topology.create_executor(
            {
                "name": name,
                "technology": "spark-standalone",
                "spark_master": spark_cluster.url,
                "queue": queue,
                "spark_conf": sizing,
            },
            capabilities=hops,
        )
    env = {**stack_env, **LOOPBACK, "WORKER_STOP_SECONDS": "3"}
    env.pop("PYSPARK_PYTHON")  # the worker gives its executors its own Python, unasked
    celery = [start_worker(f"cluster-{n}", ["it.cluster"], env, logs, wait_ready=False) for n in "ab"]
    schedulers = [start_scheduler(f"scheduler-{n}", env, logs) for n in "ab"]
    late: Proc | None = None
    try:
        for worker in celery:
            worker.wait_for_log("ready.", timeout=120)
        # Each worker's application holds its share (two cores by default), both with executors.
        wait_until(
            lambda: [a["cores"] for a in _flowport_apps(spark_cluster.web_port)] == [2, 2],
            120,
            "two applications of two cores each",
        )
        owner = get_user_model().objects.create(username="olivia")
        orders = flow_services.set_paused(
            flow_services.create_flow(
                owner=owner,
                data={
                    "flow_group": "it",
                    "flow_name": "orders-to-lake",
                    "source": "shopdb",
                    "destinations": ["lake"],
                    "paused": True,
                    "properties": {
                        "source.jdbc.tables": "shop.orders",
                        "extract.delta.fields": "seq",
                        "source.jdbc.num.partitions": "2",
                        "source.jdbc.arrow": "true",
                        "writer.output.format": "parquet",
                    },
                },
            ),
            False,
        )
        release = tmp_path / "release"
        numbers = make_flow(
            **{"numbers.per.run": "40", "slow.seconds.per.row": "2", "slow.release.file": str(release)}
        )
        jdbc_run = services.run_now(orders, user=owner)
        files_run = services.run_now(numbers, user=numbers.owner)

        def files_tasks_running() -> bool:
            job = JobExecution.objects.filter(execution__execution_id=files_run.execution_id).first()
            return bool(job and job.status == JobStatus.RUNNING and (job.progress or {}).get("tasks_total"))

        wait_until(files_tasks_running, 300, "the files job's Spark tasks to run")
        # Both of its application's executors (one on each Spark worker) have joined the driver: on a
        # loaded machine the second may come tens of seconds after the first task started.
        wait_until(
            lambda: re.search(r"\b2 executor\(s\)", _job(files_run).log_excerpt),
            120,
            "the files job's application to hold two executors",
        )
        spark_cluster.workers[0].kill9()  # a Spark worker and its executors die mid-job

        def loss_said() -> str:
            job = _job(files_run)
            return LOST if job.status == JobStatus.RUNNING and LOST in job.log_excerpt else ""

        # The job's log says so while the job still runs (the rows wait for the release file).
        wait_until(loss_said, 120, "the files job's log to say its application lost an executor")
        release.touch()
        # Both applications now hold the one Spark worker left: a third worker's gets no core.
        late = start_worker("cluster-late", ["it.late"], env, logs, wait_ready=False)
        jdbc_run, files_run = finished(jdbc_run, timeout=420), finished(files_run, timeout=420)
        assert jdbc_run.status == ExecutionStatus.COMMITTED, jdbc_run.message
        assert files_run.status == ExecutionStatus.COMMITTED, files_run.message
        assert published_ids(lake / "it" / "numbers-to-lake") == list(range(1, 41))
        written = pq.read_table(lake / "it" / "orders-to-lake").column("id").to_pylist()
        assert sorted(written) == list(range(1, ORDERS + 1))
        states = _job(jdbc_run).task_states
        assert [s["fork_feed"] for s in states] == ["direct"]  # the executors wrote the Parquet

        assert "Spark application app-" in _job(jdbc_run).log_excerpt  # which application ran it
        assert LOST in _job(files_run).log_excerpt  # the killed Spark worker's, kept in the final log
        # The job's Spark panel has the same: the application and the executor it lost.
        panel = _job(files_run).progress["spark"]
        assert panel["application_id"].startswith("app-") and panel["master"].startswith("spark://")
        assert any(e["kind"] == "executors_lost" for e in panel["events"]), panel

        later = make_flow(destination="late-lake", **{"numbers.per.run": "5"})
        late.wait_for_log("ready.", timeout=180)
        waiting_run = services.run_now(later, user=later.owner)

        def waiting_message() -> str:
            job = JobExecution.objects.filter(execution__execution_id=waiting_run.execution_id).first()
            return (
                job.message if job and job.status == JobStatus.RUNNING and NO_EXECUTORS in job.message else ""
            )

        message = wait_until(waiting_message, 300, "the starved job to say it waits for executors")
        assert message.startswith("Waiting for Spark executors: Spark application app-")
        starved = JobExecution.objects.filter(execution__execution_id=waiting_run.execution_id).first()
        record = starved.progress["spark"] if starved else {}
        assert record.get("state") == "WAITING" and record.get("executors") == 0, record
        assert "no_executors" in [e["kind"] for e in record["events"]]  # the job's Spark panel
        health = wait_until(
            lambda: SpecExecutor.objects.filter(name="late", health_status="DEGRADED").first(),
            120,
            "the late executor's health to say it",
        )
        assert NO_EXECUTORS in health.health_message
        # Told to stop, the worker stops though its Spark job never started.
        stopping = time.monotonic()
        late.popen.send_signal(signal.SIGTERM)
        try:
            late.popen.wait(60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the worker ignored SIGTERM:\n{late.log()[-3000:]}") from None
        assert time.monotonic() - stopping < 60
        assert "exiting now" in late.log()
    finally:
        for proc in [*celery, *schedulers, *([late] if late else [])]:
            proc.stop()
