"""An Iceberg destination against a files destination, on the same run.

Standalone (not a pytest test). Generates a Parquet landing of N rows (bigint id, text, decimal,
UTC timestamp), then with the real pipeline on Spark ``local[2]`` times, each a fresh execution:

1. reference: the run and its commit into a files destination (PARQUET, ``fs_rename`` steps);
2. append: the same run into an Iceberg table on a SQLite catalog (the Spark files, then ONE
   ``iceberg_commit``: move + ``add_files``);
3. merge: a run of N/10 rows, half of them keys already in the table, merged on ``id``
   (the rows read into Arrow and upserted in one commit), against the N-row table.

Goal: append <= 1.3x the files reference end to end (the commit is metadata only). Prints the
figures, the commit steps' own times and the ratios.

    .venv/bin/python tests/bench/bench_iceberg.py [rows]
"""

from __future__ import annotations

import datetime as dt
import decimal
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from portal.pipeline import run_job  # noqa: E402
from portal.pipeline.destinations.commit_steps import CommitSequence  # noqa: E402
from portal.pipeline.destinations.commitplan import cleanup_task_output, plan_commit  # noqa: E402
from portal.pipeline.destinations.iceberg import load_catalog  # noqa: E402
from portal.pipeline.spark.session import get_or_create_spark  # noqa: E402

ROWS, GOAL = 1_000_000, 1.3


def landing(folder: Path, start: int, rows: int, name: str) -> None:
    ids = pa.array(range(start, start + rows), pa.int64())
    base = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    table = pa.table(
        {
            "id": ids,
            "station": pa.array([f"st-{i % 97}" for i in range(start, start + rows)]),
            "celsius": pa.array(
                [decimal.Decimal(i % 4000).scaleb(-2) for i in range(start, start + rows)],
                pa.decimal128(9, 2),
            ),
            "taken_at": pa.array(
                [base + dt.timedelta(seconds=i) for i in range(start, start + rows)],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / name)


def run(spark, work: Path, props: dict[str, str], execution_id: int) -> tuple[float, float]:
    """(whole run + commit, the commit's steps alone) in seconds."""
    spec = {
        "job_name": "bench",
        "flow_group": "bench",
        "flow_name": "iceberg",
        "execution_id": execution_id,
        "properties": props,
        "previous_watermarks": {},
        "work_dir": str(work / "work"),
    }
    started = time.perf_counter()
    states = run_job(spark, spec)
    assert all(s["status"] == "SUCCEEDED" for s in states), [s["error"] for s in states]
    committing = time.perf_counter()
    for urn, steps in plan_commit(spec, states).items():
        CommitSequence.from_dicts([s for s in steps if s["type"] != "high_watermark"], props, urn).run()
    done = time.perf_counter()
    cleanup_task_output(spec)
    return done - started, done - committing


def main(rows: int) -> int:
    spark = get_or_create_spark("local[2]", "bench-iceberg", {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory(prefix="bench-iceberg-") as tmp:
        work = Path(tmp)
        landing(work / "landing" / "readings", 0, rows, "a.parquet")
        source = {
            "source.class": "portal.pipeline.sources.files.FileSource",
            "source.files.path": str(work / "landing"),
            "source.files.format": "parquet",
        }
        uri, warehouse = f"sqlite:///{work / 'catalog.db'}", str(work / "warehouse")
        iceberg = {
            **source,
            "writer.output.format": "ICEBERG",
            "writer.iceberg.catalog.uri": uri,
            "writer.iceberg.warehouse": warehouse,
            "writer.iceberg.namespace": "bench",
        }
        # Warm-up: the JVM, and pyiceberg's import (~3 s, once per worker process, not per commit).
        run(spark, work, {**source, "data.publisher.final.dir": str(work / "warm")}, 1)
        load_catalog(uri, None, warehouse)
        files, appends = [], []
        for attempt in range(2):  # alternated, best of two each: the machine is shared
            lake = {**source, "data.publisher.final.dir": str(work / f"lake{attempt}")}
            files.append(run(spark, work, lake, 10 + attempt))
            into = {**iceberg, "writer.iceberg.table": f"append{attempt}"}
            appends.append(run(spark, work, into, 20 + attempt))
        (files_total, files_commit), (append_total, append_commit) = min(files), min(appends)
        table = load_catalog(uri, None, warehouse).load_table(("bench", "append1"))
        assert table.scan().count() == rows

        changes = work / "changes"
        landing(changes / "readings", rows - rows // 20, rows // 10, "b.parquet")
        merge = {**iceberg, "source.files.path": str(changes), "writer.iceberg.write.mode": "merge",
                 "extract.primary.key.fields": "id", "writer.iceberg.table": "append1"}  # fmt: skip
        merge_total, merge_commit = run(spark, work, merge, 30)
        assert table.refresh().scan().count() == rows + rows // 20
    print(f"rows: {rows:,} (Spark local[2])")
    print(f"files destination : {files_total:7.2f} s  (commit steps {files_commit:6.2f} s)")
    print(f"iceberg append    : {append_total:7.2f} s  (commit       {append_commit:6.2f} s)")
    print(
        f"iceberg merge {rows // 10:,} rows into {rows:,}: {merge_total:7.2f} s  (commit {merge_commit:6.2f} s)"
    )
    ratio = append_total / files_total
    print(f"append / files = {ratio:.2f}x (goal <= {GOAL}x): {'OK' if ratio <= GOAL else 'MISSED'}")
    spark.stop()
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else ROWS))
