"""Executors on YARN or Kubernetes: the job runs as its own Spark
application through `spark-submit` in cluster deploy mode, its driver on the
cluster, instead of on the worker's long-lived SparkSession.

The worker writes the JobSpec (ciphertext only) to the work dir, ships the
`portal` package as a zip, and runs `python -m portal.pipeline run` as the
application; the driver decrypts with the master key ring file at
`SPARK_SUBMIT_MASTER_KEY_FILE` (an ACL-protected path on a filesystem the
cluster shares, as the GaaS design puts it) and writes its TaskStates to the
work dir, where the worker reads them back and commits as for any job.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from typing import Any

import pyspark
from django.conf import settings

from portal.pipeline import fs
from portal.pipeline.spark.session import spark_jars
from portal.quotas.services import memory_mb

logger = logging.getLogger(__name__)

CLUSTER_TECHNOLOGIES = ("yarn", "k8s")
_zip_lock = threading.Lock()
_zip_path: list[Path] = []


def uses_spark_submit(spec: dict[str, Any]) -> bool:
    return spec.get("technology") in CLUSTER_TECHNOLOGIES


def spark_submit_binary() -> str:
    home = os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).parent)
    return str(Path(home) / "bin" / "spark-submit")


def portal_zip() -> Path:
    """The `portal` package as --py-files, built once per process and named by its content, so an
    upgraded worker never ships the zip an older version left in the shared var dir."""
    with _zip_lock:
        if not _zip_path or not _zip_path[0].exists():  # the var dir may have been cleaned meanwhile
            _zip_path.clear()
            package = Path(settings.BASE_DIR) / "portal"
            sources = sorted(package.rglob("*.py"))
            digest = hashlib.sha256()
            for path in sources:
                digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
            target = Path(settings.VAR_DIR) / "spark-submit" / f"portal-{digest.hexdigest()[:16]}.zip"
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_suffix(f".{os.getpid()}.partial")
                with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
                    for path in sources:
                        archive.write(path, path.relative_to(package.parent))
                partial.replace(target)
            _zip_path.append(target)
    return _zip_path[0]


def _lower(conf: dict[str, Any], key: str, cap: int, default: int | None = None) -> int:
    """Set `key` to `cap` unless the executor's Spark settings (or Spark's `default` for an unset
    key) already ask for less; returns the value it now has."""
    try:
        given = int(str(conf[key])) if key in conf else default
    except ValueError:
        given = None
    value = cap if given is None else min(given, cap)
    conf[key] = str(value)
    return value


def sized_conf(conf: dict[str, Any], sizing: dict[str, int]) -> dict[str, Any]:
    """The executor's Spark settings, sized to what the job may hold under its quota
    (quota_spark.spark_sizing): `cores` caps the application's cores on a standalone master
    (spark.cores.max) and, as executors of spark.executor.cores each (1 unless set), its executors
    on YARN and Kubernetes (spark.executor.instances, dynamic allocation's bounds); `memory_mb`
    caps each of its JVMs, the driver's and every executor's (spark.driver.memory,
    spark.executor.memory; Spark's default is 1g). A setting the executor keeps lower stays."""
    cores, memory = sizing.get("cores"), sizing.get("memory_mb")
    if cores:
        _lower(conf, "spark.cores.max", cores)
        _lower(conf, "spark.driver.cores", cores, default=1)
        per_executor = _lower(conf, "spark.executor.cores", cores) if "spark.executor.cores" in conf else 1
        executors = max(1, cores // per_executor)
        for key in ("spark.executor.instances", "spark.dynamicAllocation.maxExecutors"):
            _lower(conf, key, executors)
        for key in ("spark.dynamicAllocation.minExecutors", "spark.dynamicAllocation.initialExecutors"):
            if key in conf:
                _lower(conf, key, executors)
    if memory:
        for key in ("spark.driver.memory", "spark.executor.memory"):
            given = memory_mb(str(conf.get(key, "1g")))
            if given is None or given > memory:
                conf[key] = f"{memory}m"
    return conf


def submit_argv(spec: dict[str, Any], jobspec_uri: str, output_uri: str, *, deploy_mode: str) -> list[str]:
    argv = [
        spark_submit_binary(),
        "--master",
        spec.get("spark_master") or settings.SPARK_MASTER,
        "--deploy-mode",
        deploy_mode,
        "--name",
        f"flowport:{spec['job_name']}:{spec['execution_id']}",
    ]
    conf = sized_conf(dict(spec.get("spark_conf") or {}), spec.get("spark_sizing") or {})
    jars = spark_jars(conf.pop("spark.jars", None))  # --jars would override a --conf spark.jars
    for key, value in sorted(conf.items()):
        argv += ["--conf", f"{key}={value}"]
    if jars:  # the driver's session leaves spark.jars to spark-submit (see pipeline.session)
        argv += ["--jars", ",".join(jars)]
    argv += [
        "--py-files",
        str(portal_zip()),
        str(Path(settings.BASE_DIR) / "portal" / "pipeline" / "__main__.py"),
    ]
    argv += ["run", jobspec_uri, "--master", "", "--output", output_uri]
    if settings.SPARK_SUBMIT_MASTER_KEY_FILE:
        argv += ["--master-key-file", settings.SPARK_SUBMIT_MASTER_KEY_FILE]
    return argv


def run_submitted(
    spec: dict[str, Any], cancel: threading.Event, *, output_log: Path, deploy_mode: str = "cluster"
) -> list[dict[str, Any]]:
    """Run the job with spark-submit and return its TaskStates. `spec` must
    hold ciphertext only: it is written to the work dir for the driver.
    spark-submit's output (the driver's log in client mode, the application's
    state reports in cluster mode) is appended to `output_log`: a file, never a
    pipe a long job could fill."""
    base = fs.join(spec["work_dir"], "submitted", spec["job_name"], str(spec["execution_id"]))
    jobspec_uri, output_uri = fs.join(base, "jobspec.json"), fs.join(base, "taskstates.json")
    fs.write_text(jobspec_uri, json.dumps(spec))
    fs.delete(output_uri)
    argv = submit_argv(spec, jobspec_uri, output_uri, deploy_mode=deploy_mode)
    env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    logger.info("spark-submit for %s: %s", spec["job_name"], " ".join(argv[:8]))
    output_log.parent.mkdir(parents=True, exist_ok=True)
    with output_log.open("ab") as output:
        process = subprocess.Popen(argv, env=env, stdout=output, stderr=subprocess.STDOUT)
        while process.poll() is None:
            if cancel.wait(0.5):
                process.terminate()  # in cluster mode spark-submit kills the application with it
                process.wait(30)
                return []
    if not fs.exists(output_uri):
        tail = output_log.read_text(encoding="utf-8", errors="replace")[-1500:]
        raise RuntimeError(f"spark-submit exited {process.returncode} without TaskStates: {tail}")
    states: list[dict[str, Any]] = json.loads(fs.read_text(output_uri))
    return states
