"""A job run as its own application is sized by its quota: a real
spark-submit (client mode, a local master: no YARN here) of a job whose owner
may hold 1 core and 600 MiB starts an application whose executors Spark profiles
at 1 core and 600 MiB (its driver is given 600 MiB too), though the executor's
own Spark settings ask for 2 cores and 2 GiB."""

from __future__ import annotations

import re
import threading

from portal.orchestration.worker import submit
from tests.integration.stack import master_key_file

FILES_SOURCE = "portal.pipeline.sources.files.FileSource"


def test_a_submitted_job_runs_as_an_application_of_its_quotas_size(tmp_path, settings):
    settings.SPARK_SUBMIT_MASTER_KEY_FILE = master_key_file()
    orders = tmp_path / "landing" / "orders"
    orders.mkdir(parents=True)
    (orders / "orders-1.csv").write_text("id,amount\n1,10\n2,20\n")
    spec = {
        "job_name": "sized.orders",
        "flow_group": "it",
        "flow_name": "sized",
        "execution_id": 7,
        "technology": "yarn",
        "spark_master": "local[2]",
        "spark_conf": {"spark.executor.memory": "2g", "spark.executor.cores": "2"},
        "spark_sizing": {"cores": 1, "memory_mb": 600},  # what quota_spark.spark_sizing gives the worker
        "work_dir": str(tmp_path / "work"),
        "properties": {
            "source.class": FILES_SOURCE,
            "source.files.path": str(tmp_path / "landing"),
            "source.files.format": "csv",
            "writer.output.format": "json",
            "data.publisher.final.dir": str(tmp_path / "out"),
        },
    }
    log = tmp_path / "driver.log"
    states = submit.run_submitted(spec, threading.Event(), output_log=log, deploy_mode="client")
    assert [s["status"] for s in states] == ["SUCCEEDED"], states
    text = log.read_text()
    profile = re.search(r"Default ResourceProfile created, executor resources: (Map\(.*)", text)
    assert profile is not None, text[-3000:]
    assert "cores -> name: cores, amount: 1," in profile[1]
    assert "memory -> name: memory, amount: 600," in profile[1]
    argv = submit.submit_argv(spec, "spec.json", "out.json", deploy_mode="client")
    assert "spark.driver.memory=600m" in argv and "spark.cores.max=1" in argv
