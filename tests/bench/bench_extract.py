"""Benchmark of database extraction: a PostgreSQL table into Parquet files.  A standalone
script, not a test.

    python tests/bench/bench_extract.py                     # BENCH_EXTRACT_ROWS rows (default 5,000,000)
    BENCH_EXTRACT_ROWS=200000 python tests/bench/bench_extract.py --rounds 3

A generated table (``--rows`` x 8 mixed columns: bigint key, int, text, numeric(12,2), int,
timestamp, text, boolean; indexed on its watermark column, ``updated_at``, as a table read
incrementally is) in the database ``bench_extract`` of ``BENCH_DATABASE_ADMIN_URL``'s server
is loaded into Parquet by each contender, full and then incremental (1 % new rows past the
watermark), ``--rounds`` interleaved rounds each (every contender once per round), medians:

* ``psql \\copy (SELECT ...) TO '/dev/null'`` — the database's own export, the floor;
* connectorx -> pyarrow Parquet, and dlt ``sql_database`` (connectorx backend) -> filesystem Parquet,
  run by the benchmark-only virtualenv ``.venv-bench`` (``BENCH_VENV``; ``make bench`` creates it
  from tests/bench/requirements-bench.txt) — never Flowport's runtime requirements;
* plain PySpark ``read.jdbc`` -> ``write.parquet`` on this process's warm session;
* Flowport ``run_job`` + publish on the same warm session, as configured by default
  (``source.jdbc.arrow=auto``: COPY into Arrow batches that the Python workers write to Parquet
  themselves, :mod:`portal.pipeline.sources.arrow_pg` and :mod:`portal.pipeline.destinations.directwrite`) and
  with ``source.jdbc.arrow=false`` (Spark's JDBC reader and Parquet writer: the same extraction as
  plain PySpark, so their ratio is what Flowport adds);
* the Flowport CLI (``python -m portal.pipeline run``, default settings) in a fresh process: a cold
  JVM, whose share of SparkSession start-up (the CLI reports it on stderr) is printed.

The machine may be shared and loaded: read the ratios (each against a reference measured in the
same rounds), not the seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from portal.pipeline import run_job  # noqa: E402
from portal.pipeline.destinations.commit_steps import CommitSequence  # noqa: E402
from portal.pipeline.destinations.commitplan import cleanup_task_output, plan_commit  # noqa: E402
from portal.pipeline.spark.session import get_or_create_spark  # noqa: E402

TABLE = "bench_events"
DATABASE = "bench_extract"
CONTENDERS = ("copy", "connectorx", "dlt", "spark", "flowport", "flowport_jdbc", "cli")
LABELS = {
    "copy": "psql \\copy ... to /dev/null (COPY floor)",
    "connectorx": "connectorx -> pyarrow Parquet",
    "dlt": "dlt sql_database (connectorx) -> Parquet",
    "spark": "plain PySpark read.jdbc -> parquet, warm",
    "flowport": "Flowport pipeline, warm (default: Arrow)",
    "flowport_jdbc": "Flowport, warm, arrow=false (Spark JDBC)",
    "cli": "Flowport CLI, cold JVM",
}
_SESSION_LINE = re.compile(r"SparkSession started in ([0-9.]+) s")


def create_table(admin_url: str, rows: int) -> dict[str, Any]:
    parts = urlsplit(admin_url)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DATABASE}"')
    db = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 5432,
        "user": parts.username or "postgres",
        "password": parts.password or "",
    }
    auth = db["user"] + (f":{db['password']}" if db["password"] else "")
    db["uri"] = f"postgresql://{auth}@{db['host']}:{db['port']}/{DATABASE}"
    db["jdbc"] = f"jdbc:postgresql://{db['host']}:{db['port']}/{DATABASE}"
    with psycopg.connect(db["uri"], autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, customer_id int, country text, amount numeric(12,2),"
            " qty int, updated_at timestamp, note text, flag boolean)"
        )
        insert(conn, 1, rows)
        # As any table read incrementally by a column has: every contender's WHERE uses it.
        conn.execute(f"CREATE INDEX {TABLE}_updated_at ON {TABLE} (updated_at)")
        conn.execute(f"VACUUM ANALYZE {TABLE}")
    return db


def insert(conn: psycopg.Connection, first: int, count: int) -> None:
    conn.execute(
        f"INSERT INTO {TABLE} SELECT i, i % 100000, (ARRAY['NO','SE','DE'])[i % 3 + 1], (i % 10000) / 100.0,"  # noqa: S608
        " i % 17, timestamp '2024-01-01' + i * interval '1 second', 'note-' || (i % 997), i % 2 = 0"
        f" FROM generate_series({first}, {first + count - 1}) i"
    )


def high_at(row: int) -> str:
    """The watermark value (updated_at) of row ``row``."""
    return str(dt.datetime(2024, 1, 1) + dt.timedelta(seconds=row))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=int(os.environ.get("BENCH_EXTRACT_ROWS", 5_000_000)))
    parser.add_argument("--rounds", type=int, default=int(os.environ.get("BENCH_EXTRACT_ROUNDS", 3)))
    parser.add_argument("--master", default=os.environ.get("SPARK_MASTER", f"local[{os.cpu_count() or 2}]"))
    parser.add_argument("--venv", default=os.environ.get("BENCH_VENV", str(ROOT / ".venv-bench")))
    parser.add_argument(
        "--admin-url",
        default=os.environ.get("BENCH_DATABASE_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument(
        "--only",
        default=os.environ.get("BENCH_EXTRACT_ONLY", ""),
        help="comma list of contenders to run (default all: " + ",".join(CONTENDERS) + ")",
    )
    args = parser.parse_args()
    chosen = [n for n in CONTENDERS if not args.only or n in args.only.split(",")]
    bench_python = Path(args.venv) / "bin" / "python"
    if not bench_python.exists():
        raise SystemExit(
            f"{bench_python} is missing: `make bench` creates it (tests/bench/requirements-bench.txt)"
        )
    rows, new_rows = args.rows, max(1, args.rows // 100)
    parts = os.cpu_count() or 2
    work = Path(tempfile.mkdtemp(prefix="flowport-bench-extract-"))
    print(f"Extraction benchmark: {rows:,} rows x 8 columns in PostgreSQL -> Parquet, master {args.master}")
    started = time.perf_counter()
    db = create_table(args.admin_url, rows)
    print(f"  generated the table in {time.perf_counter() - started:.1f} s", flush=True)

    spark = get_or_create_spark(args.master, "flowport-bench-extract", {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    jdbc_props = {"user": db["user"], "password": db["password"], "driver": "org.postgresql.Driver"}

    def flowport_props(out: Path, arrow: bool) -> dict[str, str]:
        return {
            "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
            "source.jdbc.url": db["jdbc"],
            "source.conn.username": db["user"],
            "source.conn.password": db["password"],
            "source.jdbc.tables": TABLE,
            "extract.delta.fields": "updated_at",
            "extract.primary.key.fields": "id",
            "source.jdbc.num.partitions": str(parts),
            "source.jdbc.arrow": "auto" if arrow else "false",
            "data.publisher.final.dir": str(out / "lake"),
        }

    def jobspec(out: Path, arrow: bool, mark: str | None, execution: int) -> dict[str, Any]:
        return {
            "job_name": "bench_extract",
            "execution_id": execution,
            "properties": flowport_props(out, arrow),
            "previous_watermarks": {TABLE: mark} if mark else {},
            "work_dir": str(out / "work"),
        }

    executions = iter(range(1, 1_000_000))

    def flowport(out: Path, low: str | None, arrow: bool) -> int:
        spec = jobspec(out, arrow, low, next(executions))
        states = run_job(spark, spec)
        if states[0]["status"] != "SUCCEEDED":
            raise SystemExit(f"Flowport run failed: {states[0]['error']}")
        for urn, steps in plan_commit(spec, states).items():
            CommitSequence.from_dicts(
                [s for s in steps if s["type"] != "high_watermark"], spec["properties"], urn
            ).run()
        cleanup_task_output(spec)
        return sum(s["records_extracted"] for s in states)

    own_seconds: dict[str, float] = {}  # a contender's own time, where the call does more

    def where(low: str | None) -> str:
        return f" WHERE updated_at > '{low}'" if low else ""

    def copy(out: Path, low: str | None) -> int:
        env = {**os.environ, "PGPASSWORD": db["password"]}
        command = f"\\copy (SELECT * FROM {TABLE}{where(low)}) TO '/dev/null'"  # noqa: S608 - generated values
        done = subprocess.run(
            [
                "psql",
                "-h",
                db["host"],
                "-p",
                str(db["port"]),
                "-U",
                db["user"],
                "-d",
                DATABASE,
                "-Atc",
                command,
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return int(done.stdout.split()[-1])  # "COPY n"

    def contender(name: str, *argv: str) -> Callable[[Path, str | None], int]:
        def run(out: Path, low: str | None) -> int:
            cmd = [str(bench_python), str(ROOT / "tests" / "bench" / "extract_contenders.py"), name, *argv]
            if name == "connectorx":
                query = f"SELECT * FROM {TABLE}{where(low)}"  # noqa: S608 - generated values
                cmd = [*cmd[:4], query, str(out / "out.parquet"), str(parts)]
            else:
                cmd = [*cmd[:4], TABLE, str(out / "lake"), str(out / "dlt"), low or ""]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode:
                raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            own_seconds[name] = result["seconds"]  # the load's own time, not the interpreter's start
            return int(result["rows"])

        return run

    def plain_spark(out: Path, low: str | None) -> int:
        query = f"(SELECT * FROM {TABLE}{where(low)}) AS q"  # noqa: S608 - generated values
        began = time.perf_counter()
        df = spark.read.jdbc(db["jdbc"], query, "id", 1, rows + new_rows + 1, parts, properties=jdbc_props)
        df.write.mode("overwrite").parquet(str(out / "out"))
        own_seconds["spark"] = time.perf_counter() - began  # the count below is the benchmark's check
        return sum(pq.ParquetFile(f).metadata.num_rows for f in (out / "out").glob("*.parquet"))

    session_start: list[float] = []

    def cli(out: Path, low: str | None) -> int:
        spec_path = out / "jobspec.json"
        spec_path.write_text(json.dumps(jobspec(out, True, low, next(executions))))
        env = {**os.environ, "SPARK_LOG_LEVEL": "ERROR"}
        done = subprocess.run(
            [sys.executable, "-m", "portal.pipeline", "run", str(spec_path), "--master", args.master],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise SystemExit(f"Flowport CLI failed:\n{done.stderr[-3000:]}")
        found = _SESSION_LINE.search(done.stderr)
        session_start.append(float(found.group(1)) if found else float("nan"))
        return sum(s["records_extracted"] for s in json.loads(done.stdout))

    runs: dict[str, Callable[[Path, str | None], int]] = {
        "copy": copy,
        "connectorx": contender("connectorx", db["uri"]),
        "dlt": contender("dlt", db["uri"]),
        "spark": plain_spark,
        "flowport": lambda out, low: flowport(out, low, True),
        "flowport_jdbc": lambda out, low: flowport(out, low, False),
        "cli": cli,
    }

    def measure(name: str, low: str | None, expected: int, label: str) -> float:
        out = work / f"{name}-{label}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        began = time.perf_counter()
        count = runs[name](out, low)
        elapsed = own_seconds.pop(name, None) or (time.perf_counter() - began)
        if count < expected:
            raise SystemExit(f"{name} ({label}) read {count} rows, expected {expected}")
        shutil.rmtree(out, ignore_errors=True)
        print(f"  {LABELS[name]:<44} {label:<12} {elapsed:8.2f} s", flush=True)
        return elapsed

    # Warm-up: the warm contenders' JVM code paths (JDBC and Arrow readers, Parquet writer) once on
    # 10 % of the table, unmeasured, as in a worker that has run jobs before.
    tenth = high_at(rows - rows // 10)
    for name in [n for n in ("spark", "flowport", "flowport_jdbc") if n in chosen]:
        runs[name](work / f"warm-{name}", tenth)
        shutil.rmtree(work / f"warm-{name}", ignore_errors=True)

    full: dict[str, list[float]] = {n: [] for n in CONTENDERS}
    for r in range(1, args.rounds + 1):
        print(f" full load, round {r}", flush=True)
        for name in chosen:
            full[name].append(measure(name, None, rows, f"full #{r}"))
    cli_start = list(session_start)
    high = high_at(rows)
    with psycopg.connect(db["uri"], autocommit=True) as conn:
        insert(conn, rows + 1, new_rows)
    incremental: dict[str, list[float]] = {n: [] for n in CONTENDERS}
    for r in range(1, args.rounds + 1):
        print(f" incremental 1 %, round {r}", flush=True)
        for name in chosen:
            incremental[name].append(measure(name, high, new_rows, f"inc #{r}"))
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)

    nan = float("nan")
    med = {n: statistics.median(v) if v else nan for n, v in full.items()}
    inc = {n: statistics.median(v) if v else nan for n, v in incremental.items()}
    print(f"\nResults: medians of {args.rounds} interleaved rounds, {rows:,} rows (incremental {new_rows:,})")
    print(f"  {'contender':<44} {'full load':>10} {'x COPY':>8} {'incr. 1 %':>10}")
    for name in chosen:
        print(f"  {LABELS[name]:<44} {med[name]:9.2f}s {med[name] / med['copy']:7.2f}x {inc[name]:9.2f}s")
    print("  ratios (the goals):")
    print(
        f"    Flowport (arrow=false) / plain PySpark, full       {med['flowport_jdbc'] / med['spark']:6.2f}x  (<= 1.10)"
    )
    print(
        f"    Flowport (default) / COPY floor, full             {med['flowport'] / med['copy']:6.2f}x  (<= 2.0)"
    )
    print(
        f"    Flowport (default) / dlt, full                    {med['flowport'] / med['dlt']:6.2f}x  (< 1.0)"
    )
    print(f"    Flowport (default) / plain PySpark, full          {med['flowport'] / med['spark']:6.2f}x")
    for name, reader in (("flowport", "default"), ("flowport_jdbc", "arrow=false")):
        ratio = inc[name] / inc["spark"]
        print(f"    Flowport ({reader}) / plain PySpark, incr. 1 %  {ratio:6.2f}x  (<= 1.5)")
    cold = statistics.median(full["cli"]) if full["cli"] else nan
    start = statistics.median(cli_start) if cli_start else float("nan")
    print(
        f"    CLI cold run: SparkSession start-up {start:.1f} s of {cold:.1f} s ({start / cold:.0%}); "
        f"the same job warm {med['flowport']:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
