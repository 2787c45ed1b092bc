"""What a YARN/K8s executor ships with spark-submit."""

from __future__ import annotations

import zipfile

import pytest

from portal.orchestration.worker import submit


@pytest.fixture
def package(tmp_path, settings, monkeypatch):
    """A stand-in `portal` package under a fresh BASE_DIR, and a fresh process's zip cache."""
    settings.BASE_DIR = tmp_path / "release"
    settings.VAR_DIR = tmp_path / "var"
    (settings.BASE_DIR / "portal" / "pipeline").mkdir(parents=True)
    monkeypatch.setattr(submit, "_zip_path", [])
    return settings.BASE_DIR / "portal"


def test_an_upgraded_worker_ships_its_own_code_not_the_zip_an_older_version_left(package, monkeypatch):
    (package / "pipeline" / "task.py").write_text("VERSION = 1\n")
    old = submit.portal_zip()
    assert submit.portal_zip() == old  # built once per process

    (package / "pipeline" / "task.py").write_text("VERSION = 2\n")
    monkeypatch.setattr(submit, "_zip_path", [])  # the upgraded worker is a new process
    new = submit.portal_zip()

    assert new != old and old.exists()  # a worker still on the old version keeps its zip
    with zipfile.ZipFile(new) as archive:
        assert archive.read("portal/pipeline/task.py") == b"VERSION = 2\n"


def test_an_executor_adding_a_jar_keeps_flowports_jars(package):
    spec = {
        "job_name": "j",
        "execution_id": 1,
        "spark_master": "yarn",
        "spark_conf": {"spark.jars": "hdfs:///libs/oracle.jar", "spark.executor.cores": "2"},
    }
    argv = submit.submit_argv(spec, "spec.json", "out.json", deploy_mode="cluster")

    jars = argv[argv.index("--jars") + 1].split(",")
    assert jars[-1] == "hdfs:///libs/oracle.jar"
    assert any(jar.endswith("flowport-pipeline.jar") for jar in jars)
    assert "spark.jars=hdfs:///libs/oracle.jar" not in argv  # --jars would override it anyway
    assert "spark.executor.cores=2" in argv
