"""Executors on YARN/K8s run jobs with spark-submit in cluster deploy mode.
Neither cluster exists here, so the same submission runs in client mode
against a local master: a real spark-submit process, a real driver that
decrypts its secrets with the master key file and hands its TaskStates back
through the work dir."""

from __future__ import annotations

import json
import threading

from portal.crypto import client, wrapping
from portal.crypto.master import get_ring
from portal.orchestration.worker import submit
from tests.integration.stack import master_key_file

FILES_SOURCE = "portal.pipeline.sources.files.FileSource"


def test_spark_submit_runs_the_job_as_its_own_application_and_returns_its_task_states(tmp_path, settings):
    settings.SPARK_SUBMIT_MASTER_KEY_FILE = master_key_file()
    customer_key = client.generate_key()
    orders = tmp_path / "landing" / "orders"
    orders.mkdir(parents=True)
    (orders / "orders-1.csv").write_text("id,amount\n" + "".join(f"{n},{n * 10}\n" for n in range(1, 8)))
    spec = {
        "job_name": "submitted.numbers",
        "flow_group": "it",
        "flow_name": "submitted",
        "execution_id": 42,
        "technology": "yarn",
        "spark_master": "local[2]",
        "spark_conf": {"spark.sql.shuffle.partitions": "2"},
        "work_dir": str(tmp_path / "work"),
        "properties": {
            "source.class": FILES_SOURCE,
            "source.files.path": str(tmp_path / "landing"),
            "source.files.format": "csv",
            # A secret (one the files source does not use): only its ciphertext travels. A name
            # such as the format stays sealed if encrypted (docs/security.md), on the driver too.
            "source.conn.password": client.encrypt(customer_key, "driver-side-secret"),
            "encrypt.wrapped.key": wrapping.wrap(get_ring(), customer_key),
            # Two branches, so the one-pass fork shows that Flowport's jar reached the application.
            "fork.branches": "2",
            "writer.output.format.0": "json",
            "data.publisher.final.dir.0": str(tmp_path / "out"),
            "data.publisher.final.dir.1": str(tmp_path / "copy"),
        },
    }
    assert submit.uses_spark_submit(spec)
    argv = submit.submit_argv(spec, "spec.json", "out.json", deploy_mode="cluster")
    assert argv[argv.index("--deploy-mode") + 1] == "cluster" and "--py-files" in argv
    assert "flowport-pipeline.jar" in argv[argv.index("--jars") + 1]

    output_log = tmp_path / "logs" / "submitted.numbers.1.driver.log"
    states = submit.run_submitted(spec, threading.Event(), output_log=output_log, deploy_mode="client")

    assert [s["status"] for s in states] == ["SUCCEEDED"], states
    assert states[0]["dataset_urn"] == "orders" and states[0]["records_extracted"] == 7
    assert states[0]["fork_feed"] == "one_pass"
    assert [b["records_written"] for b in states[0]["branches"]] == [7, 7]
    shipped = json.loads(
        (tmp_path / "work" / "submitted" / "submitted.numbers" / "42" / "jobspec.json").read_text()
    )
    assert shipped["properties"]["source.conn.password"].startswith("ENC(")  # the file holds ciphertext only
    assert "driver-side-secret" not in json.dumps(shipped)
    assert "Running Spark version" in output_log.read_text()  # the driver's own log, kept for the job
