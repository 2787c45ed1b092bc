"""Benchmark of the same JDBC flow on a local master and on a loopback Spark standalone cluster, in
one run: wall time and CPU time.  A standalone script, not a test.

    python tests/bench/bench_cluster.py                 # BENCH_CLUSTER_ROWS rows (default 1,000,000)
    BENCH_CLUSTER_ROWS=200000 python tests/bench/bench_cluster.py --rounds 3

A generated PostgreSQL table (the one of bench_extract.py, in the database ``bench_cluster`` of
``BENCH_DATABASE_ADMIN_URL``'s server) is extracted into Parquet by Flowport's pipeline
(``source.jdbc.arrow=true``: COPY into Arrow batches, the Python workers writing the Parquet) on a
worker's SparkSession as ``portal.orchestration.worker.sparkctx`` makes it — once on ``local[<cores>]``,
once as a client of a standalone master and one Spark worker of as many cores started here from
PySpark's distribution — each in a process of its own (a process holds one SparkContext), one
warm-up run and then ``--rounds`` timed runs each.  CPU time is that of every process involved but
PostgreSQL: the benchmark process's tree (driver JVM, local Python workers) and, on the cluster, the
Spark worker's tree (executor JVMs, their Python workers).  On one machine the cluster can only add
cost (RPC, task shipping, a second JVM); the figures say how much.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
import pyspark  # noqa: E402

from tests.bench.bench_extract import TABLE, insert  # noqa: E402

DATABASE = "bench_cluster"
SPARK_HOME = Path(pyspark.__file__).parent
TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> float:
    """CPU seconds of `root` and its live descendants, with the children they have reaped."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(v) for v in fields[11:15]) / TICK  # utime stime cutime cstime
    total = 0.0
    for pid, seconds in times.items():
        ancestor = pid
        while ancestor not in (0, 1, root) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == root:
            total += seconds
    return total


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def create_table(admin_url: str, rows: int) -> str:
    parts = urlsplit(admin_url)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DATABASE}"')
    user = parts.username or "postgres"
    uri = f"postgresql://{user}@{parts.hostname or '127.0.0.1'}:{parts.port or 5432}/{DATABASE}"
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, customer_id int, country text, amount numeric(12,2),"
            " qty int, updated_at timestamp, note text, flag boolean)"
        )
        insert(conn, 1, rows)
        conn.execute(f"VACUUM ANALYZE {TABLE}")
    return f"jdbc:postgresql://{parts.hostname or '127.0.0.1'}:{parts.port or 5432}/{DATABASE}"


def child(args: argparse.Namespace) -> None:
    """One master's runs, in a process of its own; prints its figures as one JSON line."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from portal.orchestration.worker import sparkctx
    from portal.pipeline import run_job
    from portal.pipeline.destinations.commit_steps import CommitSequence
    from portal.pipeline.destinations.commitplan import cleanup_task_output, plan_commit

    cores = str(os.cpu_count() or 2)
    spark = sparkctx.session_for(args.master, {"spark.cores.max": cores, "spark.executor.cores": cores})
    spark.sparkContext.setLogLevel("ERROR")
    out = Path(args.out)

    feeds: set[str] = set()

    def run(execution: int) -> int:
        shutil.rmtree(out, ignore_errors=True)
        spec = {
            "job_name": "bench_cluster",
            "execution_id": execution,
            "work_dir": str(out / "work"),
            "properties": {
                "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
                "source.jdbc.url": args.jdbc,
                "source.conn.username": "postgres",
                "source.jdbc.tables": TABLE,
                "extract.delta.fields": "updated_at",
                "extract.primary.key.fields": "id",
                "source.jdbc.num.partitions": cores,
                "source.jdbc.arrow": "true",
                "data.publisher.final.dir": str(out / "lake"),
            },
        }
        states = run_job(spark, spec)
        if states[0]["status"] != "SUCCEEDED":
            raise SystemExit(f"the run failed on {args.master}: {states[0]['error']}")
        for urn, steps in plan_commit(spec, states).items():
            CommitSequence.from_dicts(
                [s for s in steps if s["type"] != "high_watermark"], spec["properties"], urn
            ).run()
        cleanup_task_output(spec)
        feeds.update(str(s["fork_feed"]) for s in states)
        return sum(s["records_extracted"] for s in states)

    roots = [os.getpid(), *([args.spark_worker_pid] if args.spark_worker_pid else [])]
    run(1)  # warm-up: the executors' Python workers, the JDBC driver, the code
    walls, cpus = [], []
    for execution in range(2, args.rounds + 2):
        cpu, started = sum(tree_cpu(r) for r in roots), time.perf_counter()
        records = run(execution)
        walls.append(time.perf_counter() - started)
        cpus.append(sum(tree_cpu(r) for r in roots) - cpu)
        if records != args.rows:
            raise SystemExit(f"{records} records on {args.master}, expected {args.rows}")
    print(json.dumps({"wall": walls, "cpu": cpus, "feed": sorted(feeds)}), flush=True)


def start_cluster(work: Path) -> tuple[list[subprocess.Popen], str, int]:
    port, web = free_port(), free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(SPARK_HOME)}
    env["SPARK_WORKER_DIR"] = str(work / "spark-work")
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    logs = (work / "spark.log").open("ab")
    master = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port)),
            *("--webui-port", str(web)),
        ],
        env=env,
        stdout=logs,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    worker = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.worker.Worker",
            *("--cores", str(os.cpu_count() or 2), "--memory", "2g"),
            *("--webui-port", str(free_port()), f"spark://127.0.0.1:{port}"),
        ],
        env=env,
        stdout=logs,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{web}/json/", timeout=5) as answer:
                if json.load(answer)["aliveworkers"] == 1:
                    return [worker, master], f"spark://127.0.0.1:{port}", worker.pid
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"the Spark worker did not register; see {work / 'spark.log'}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=int(os.environ.get("BENCH_CLUSTER_ROWS", 1_000_000)))
    parser.add_argument("--rounds", type=int, default=int(os.environ.get("BENCH_CLUSTER_ROUNDS", 3)))
    parser.add_argument(
        "--admin-url",
        default=os.environ.get("BENCH_DATABASE_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    parser.add_argument("--jdbc", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--spark-worker-pid", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    work = Path(tempfile.mkdtemp(prefix="flowport-bench-cluster-"))
    cores = os.cpu_count() or 2
    print(
        f"Local vs cluster: {args.rows:,} rows x 8 columns, PostgreSQL -> Parquet (Arrow path), {cores} cores"
    )
    jdbc = create_table(args.admin_url, args.rows)
    processes, url, worker_pid = start_cluster(work)
    figures: dict[str, dict[str, Any]] = {}
    try:
        for name, master, pid in (("local", f"local[{cores}]", 0), ("cluster", url, worker_pid)):
            argv = [sys.executable, __file__, "--child", "--master", master, "--jdbc", jdbc]
            argv += ["--rows", str(args.rows), "--rounds", str(args.rounds), "--out", str(work / name)]
            argv += ["--spark-worker-pid", str(pid)]
            env = {**os.environ, "FLOWPORT_VAR_DIR": str(work / "var"), "SPARK_LOG_LEVEL": "ERROR"}
            done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
            if done.returncode:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            figures[name] = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        for process in processes:
            os.killpg(process.pid, 15)
            process.wait(30)
    for name in ("local", "cluster"):
        wall, cpu = statistics.median(figures[name]["wall"]), statistics.median(figures[name]["cpu"])
        figures[name].update(wall_median=wall, cpu_median=cpu)
        runs = ", ".join(f"{w:.2f}" for w in figures[name]["wall"])
        print(
            f"  {name:8} wall {wall:6.2f} s   CPU {cpu:6.2f} s   (walls {runs}; feed {figures[name]['feed']})"
        )
    local, cluster = figures["local"], figures["cluster"]
    print(
        f"  cluster / local: wall {cluster['wall_median'] / local['wall_median']:.2f}x, "
        f"CPU {cluster['cpu_median'] / local['cpu_median']:.2f}x"
    )
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
