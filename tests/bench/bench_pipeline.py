"""Benchmark of the pipeline runtime (issue 9).  A standalone script, not a test.

    python tests/bench/bench_pipeline.py --rows 10000000      # default; --rows 200000 for a quick try

On generated rows (8 columns, Parquet) it measures, in one Spark session:

1. ``run_job`` + publish (plan_commit + commit steps) vs a raw ``spark.read.parquet(src).write.parquet(dst)``
   (goal <= 1.10);
2. a 3-branch fork, each branch its own format, vs the single-branch run (goal <= 1.6); measured for a
   routing fork (each record to one branch: Parquet / ORC / JSON) and, for information, an identity
   fork (three full copies: Parquet / ORC / CSV);
3. an incremental run finding 1% new rows vs the full run (goal <= 0.1);

and prints records/second and peak memory (JVM high-water RSS, Python max RSS).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from portal.pipeline import run_job
from portal.pipeline.commit_steps import CommitSequence
from portal.pipeline.publisher import cleanup_task_output, plan_commit
from portal.pipeline.session import get_or_create_spark


def generate(spark: SparkSession, rows: int, start: int, dest: Path, files: int, mtime: float) -> None:
    """``rows`` rows of 8 columns as ``files`` Parquet files, all with modification time ``mtime``."""
    df = spark.range(start, start + rows, numPartitions=files).select(
        F.col("id"),
        (F.col("id") % 100_000).alias("customer_id"),
        F.element_at(
            F.array(*[F.lit(c) for c in ("NO", "SE", "DE")]), (F.col("id") % 3 + 1).cast("int")
        ).alias("country"),
        (F.col("id") % 10_000 / 100).alias("amount"),
        (F.col("id") % 17).cast("int").alias("qty"),
        F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id")).alias("event_time"),
        F.concat(F.lit("note-"), (F.col("id") % 997).cast("string")).alias("note"),
        (F.col("id") % 2 == 0).alias("flag"),
    )
    tmp = dest.parent / f"_gen_{start}"
    df.write.mode("overwrite").parquet(str(tmp))
    dest.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(sorted(tmp.glob("part-*.parquet"))):
        target = dest / f"batch{start:012d}-{i:04d}.parquet"
        shutil.move(str(part), target)
        os.utime(target, (mtime, mtime))
    shutil.rmtree(tmp)


def timed(label: str, fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - started
    print(f"  {label:<44} {elapsed:8.2f} s", flush=True)
    return elapsed, result


def run_and_publish(spark: SparkSession, spec: dict[str, Any]) -> list[dict[str, Any]]:
    states = run_job(spark, spec)
    bad = [s for s in states if s["status"] != "SUCCEEDED"]
    if bad:
        raise SystemExit(f"run failed: {bad[0]['error']}")
    for urn, steps in plan_commit(spec, states).items():
        CommitSequence.from_dicts(
            [s for s in steps if s["type"] != "high_watermark"], spec["properties"], urn
        ).run()
    cleanup_task_output(spec)
    return states


def jvm_peak_mb(spark: SparkSession) -> float:
    pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--master", default=os.environ.get("SPARK_MASTER", f"local[{os.cpu_count() or 2}]"))
    parser.add_argument("--work", default=None, help="scratch folder (default: a temp dir, removed after)")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--skip-identity-fork", action="store_true")
    args = parser.parse_args()

    work = Path(args.work or tempfile.mkdtemp(prefix="flowport-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    spark = get_or_create_spark(
        args.master,
        "flowport-bench",
        {"spark.ui.enabled": "false", "spark.driver.memory": args.driver_memory},
    )
    spark.sparkContext.setLogLevel("ERROR")
    rows = args.rows
    files = max(2, rows // 500_000)
    src = work / "landing" / "events"
    now = time.time()
    print(
        f"Flowport pipeline benchmark: {rows:,} rows x 8 columns, {files} Parquet files, master {args.master}"
    )
    timed("generate source", lambda: generate(spark, rows, 0, src, files, now - 3600))

    def props(final: str, **extra: str) -> dict[str, str]:
        return {
            "source.class": "portal.pipeline.sources.files.FileSource",
            "source.files.path": str(work / "landing"),
            "source.files.format": "parquet",
            "data.publisher.final.dir": str(work / final),
            **extra,
        }

    def spec(
        name: str, properties: dict[str, str], execution: int = 1, marks: dict[str, str] | None = None
    ) -> dict:
        return {
            "job_name": name,
            "execution_id": execution,
            "properties": properties,
            "previous_watermarks": marks or {},
            "work_dir": str(work / "work"),
        }

    # Warm up the JVM (class loading, JIT) so the first measurement is not penalised.
    spark.read.parquet(str(src)).limit(1000).write.mode("overwrite").parquet(str(work / "warmup"))

    # The raw copy runs twice (the first also warms the JVM's JIT); the faster one is the baseline.
    raw_runs = [
        timed(
            f"raw read.parquet -> write.parquet (#{i})",
            lambda: spark.read.parquet(str(src)).write.mode("overwrite").parquet(str(work / "raw")),
        )[0]
        for i in (1, 2)
    ]
    raw_s = min(raw_runs)
    full_s, states = timed(
        "run_job + publish (single branch)", lambda: run_and_publish(spark, spec("full", props("lake")))
    )
    marks = {"events": states[0]["actual_high_watermark"]}
    route = props(
        "unused",
        **{
            "fork.operator.class": "portal.pipeline.fork.RouteByFieldForkOperator",
            "fork.branches": "3",
            "fork.route.field": "country",
            "fork.route.values.0": "NO",
            "fork.route.values.1": "SE",
            "fork.route.values.2": "*",
            "writer.output.format.1": "ORC",
            "writer.output.format.2": "JSON",
            **{f"data.publisher.final.dir.{i}": str(work / f"route{i}") for i in range(3)},
        },
    )
    route.pop("data.publisher.final.dir")
    route_s, _ = timed(
        "3-branch routing fork (Parquet/ORC/JSON)", lambda: run_and_publish(spark, spec("route", route))
    )
    identity_s = None
    if not args.skip_identity_fork:
        ident = props(
            "unused",
            **{
                "fork.branches": "3",
                "writer.output.format.1": "ORC",
                "writer.output.format.2": "CSV",
                **{f"data.publisher.final.dir.{i}": str(work / f"copy{i}") for i in range(3)},
            },
        )
        ident.pop("data.publisher.final.dir")
        identity_s, _ = timed(
            "3-branch identity fork (3 full copies)", lambda: run_and_publish(spark, spec("identity", ident))
        )

    new_rows = max(1, rows // 100)
    timed("generate 1% new rows", lambda: generate(spark, new_rows, rows, src, max(1, files // 10), now - 60))
    inc_s, inc_states = timed(
        "incremental run_job + publish (1% new)",
        lambda: run_and_publish(spark, spec("full", props("lake"), 2, marks)),
    )
    assert inc_states[0]["records_extracted"] == new_rows, inc_states[0]["records_extracted"]
    published = spark.read.parquet(str(work / "lake" / "events")).count()
    assert published == rows + new_rows, published

    print("\nResults")
    print(f"  1. run_job+publish / raw read-write      {full_s / raw_s:6.2f}x   (goal <= 1.10)")
    print(f"  2. 3-branch routing fork / single        {route_s / full_s:6.2f}x   (goal <= 1.6)")
    if identity_s is not None:
        print(
            f"     3-branch identity fork / single       {identity_s / full_s:6.2f}x   (3x the bytes written)"
        )
    print(f"  3. incremental 1% / full run             {inc_s / full_s:6.2f}x   (goal <= 0.1)")
    print(f"  records/s, full run                      {rows / full_s:,.0f}")
    print(f"  records/s, raw read-write                {rows / raw_s:,.0f}")
    print(
        f"  peak memory: JVM {jvm_peak_mb(spark):,.0f} MiB, Python driver "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB"
    )
    spark.stop()
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
