"""The process definitions agree: `make run` (deploy/supervisord.conf), the
systemd units (deploy/systemd/) and the Procfile run the same three commands,
and each supervisor restarts a process that dies."""

from __future__ import annotations

import configparser
import os
import shlex
import subprocess
from pathlib import Path

import pyspark

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = ("web", "worker", "scheduler")


def procfile() -> dict[str, str]:
    lines = (ROOT / "Procfile").read_text().splitlines()
    return {name.strip(): command.strip() for name, command in (line.split(":", 1) for line in lines if line)}


def shell_body(command: str) -> str:
    """`/bin/sh -c 'exec CMD'` -> CMD."""
    argv = shlex.split(command)
    assert argv[:2] == ["/bin/sh", "-c"] and argv[2].startswith("exec "), command
    return argv[2].removeprefix("exec ")


def ini(path: Path) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, inline_comment_prefixes=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(path.read_text())
    return parser


def test_supervisord_runs_the_procfile_commands_and_restarts_them():
    conf = ini(ROOT / "deploy" / "supervisord.conf")
    assert conf.get("supervisord", "nodaemon") == "true"
    for name in PROCESSES:
        program = conf[f"program:{name}"]
        assert shell_body(program["command"]) == procfile()[name]
        assert program["autorestart"] == "true" and int(program["startretries"]) >= 100
        assert program["killasgroup"] == "true"  # past stopwaitsecs, everything it started
        # The worker alone is told to stop, so it can stop its Spark JVM itself (a JVM signalled
        # with it dies under PySpark); the others' children stop with them.
        assert program["stopasgroup"] == ("false" if name == "worker" else "true")


def test_the_systemd_units_run_the_procfile_commands_and_restart_them():
    for name in PROCESSES:
        unit = ini(ROOT / "deploy" / "systemd" / f"flowport-{name}.service")
        assert shell_body(unit.get("Service", "ExecStart")) == procfile()[name]
        assert unit.get("Service", "Restart") == "always"
        assert unit.get("Unit", "StartLimitIntervalSec") == "0"
        assert unit.get("Service", "EnvironmentFile") == "/etc/flowport/flowport.env"


def test_make_run_starts_supervisord():
    run = (ROOT / "Makefile").read_text().split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "supervisord -c deploy/supervisord.conf" in run


def test_the_spark_workers_of_the_deploy_files_clean_their_work_folders_outside_the_venv():
    """What Spark's own launcher makes of deploy/spark/spark-env.sh (the folder the Spark units
    name as SPARK_CONF_DIR): a Worker started from it removes finished applications' folders,
    kept in /var/lib/flowport/spark-work instead of $SPARK_HOME/work inside the virtualenv."""
    spark_home = Path(pyspark.__file__).parent
    for unit in ("flowport-spark-master", "flowport-spark-worker"):
        service = ini(ROOT / "deploy" / "systemd" / f"{unit}.service")["Service"]
        assert service["Environment"] == "SPARK_CONF_DIR=/opt/flowport/deploy/spark"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_WORKER_")}
    env.update(SPARK_HOME=str(spark_home), SPARK_CONF_DIR=str(ROOT / "deploy" / "spark"))
    script = (
        '. "$SPARK_HOME/bin/load-spark-env.sh"; echo "$SPARK_WORKER_DIR"; '
        'java -cp "$SPARK_HOME/jars/*" org.apache.spark.launcher.Main '
        "org.apache.spark.deploy.worker.Worker spark://127.0.0.1:7077"
    )
    launched = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert launched.returncode == 0, launched.stderr
    work_dir, command = launched.stdout.split("\n", 1)
    argv = command.split("\0")
    assert work_dir == "/var/lib/flowport/spark-work"
    assert "-Dspark.worker.cleanup.enabled=true" in argv
    assert "-Dspark.worker.cleanup.appDataTtl=86400" in argv
    assert "org.apache.spark.deploy.worker.Worker" in argv
