"""The cluster path: a spark-standalone executor runs its job on a real
Spark standalone master and worker started from PySpark's distribution on
loopback, through a Celery worker whose SparkSession is a client of it."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import pyspark
import pytest

from portal.orchestration import services
from portal.orchestration.models import ExecutionStatus
from portal.topology import services as topology
from tests.integration.stack import Proc, start_worker, wait_until
from tests.integration.test_orchestration import finished, make_flow, published_ids
from tests.ports import free_port

pytestmark = pytest.mark.django_db(transaction=True)

SPARK_HOME = Path(pyspark.__file__).parent
LOOPBACK = {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(SPARK_HOME), "PYSPARK_PYTHON": sys.executable}


def master_state(web_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=5) as response:
        return json.load(response)


@pytest.fixture
def spark_cluster(stack_env, stack_dir):
    port, web_port = free_port(), free_port()
    env = {**stack_env, **LOOPBACK}
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
    worker = Proc(
        "spark-worker",
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
    try:
        wait_until(lambda: _alive_workers(web_port), 90, "the Spark worker to register with the master")
        yield f"spark://127.0.0.1:{port}", web_port
    finally:
        worker.stop()
        master.stop()


def _alive_workers(web_port: int) -> int:
    try:
        return master_state(web_port)["aliveworkers"]
    except OSError:
        return 0


def test_a_standalone_executor_runs_its_job_on_the_cluster(
    tmp_path, spark_cluster, stack_env, stack_dir, scheduler
):
    master_url, web_port = spark_cluster
    for name in ("landing", "lake"):
        (tmp_path / name).mkdir()
        topology.create_data_node(
            {"name": name, "kind": "files", "properties": {"path": str(tmp_path / name)}}
        )
    topology.create_executor(
        {
            "name": "cluster",
            "technology": "spark-standalone",
            "spark_master": master_url,
            "queue": "it.cluster",
        },
        capabilities=[("landing", "lake")],
    )
    worker = start_worker("cluster-worker", ["it.cluster"], {**stack_env, **LOOPBACK}, stack_dir / "logs")
    try:
        flow = make_flow(**{"numbers.per.run": "25"})
        execution = finished(services.run_now(flow, user=flow.owner), timeout=180)
        apps = master_state(web_port)["activeapps"]
    finally:
        worker.stop()
    assert execution.status == ExecutionStatus.COMMITTED, execution.message
    assert published_ids(tmp_path / "lake" / "it" / "numbers-to-lake") == list(range(1, 26))
    # The job's SparkSession was an application of the standalone master, with its executors' cores.
    assert [app["name"] for app in apps if app["name"].startswith("flowport-worker@")], apps
    assert all(app["cores"] > 0 for app in apps), apps
