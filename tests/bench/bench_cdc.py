"""Change data capture throughput from one PostgreSQL slot, against ``pg_recvlogical`` reading the
same changes to /dev/null in the same run (the floor: the server's own client, no decoding of rows).

Standalone (not a pytest test). A private server with ``wal_level=logical`` (tests/pg_logical.py)
gets a table of CHANGES/2 rows inserted and then all updated (CHANGES row changes in two
transactions), captured by two slots made before the changes: one read by ``pg_recvlogical
--endpos`` (pgoutput, to /dev/null), one by Flowport:

* ``decode``: the cdc source's read alone: ``pg_logical_slot_peek_binary_changes`` and the pgoutput
  decoder (:mod:`portal.pipeline.pgoutput`), every change turned into a row;
* ``into Parquet``: a whole cdc run on Spark (``local[2]``) whose changes land in a Parquet change
  log, planning (peek, decode, staging) to publish;
* ``into PostgreSQL``: the same run merged by key into a table of ``BENCH_PG_SERVER``'s PostgreSQL.

Goal: >= 20,000 changes/s and within 3x of the floor.

    .venv/bin/python tests/bench/bench_cdc.py [--changes N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from portal.pipeline import cdc_pg  # noqa: E402
from portal.pipeline.pgoutput import Decoder, format_lsn  # noqa: E402
from tests.pg_logical import _as_postgres, _bin, private_server  # noqa: E402

DEST = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")


def floor(url: str, db: str, slot: str, upto: int) -> float:
    port = url.rsplit(":", 1)[1].split("/")[0]
    started = time.perf_counter()
    subprocess.run(
        _as_postgres([_bin("pg_recvlogical"), "-h", "127.0.0.1", "-p", port, "-U", "postgres", "-d", db,
                      f"--slot={slot}", "--start", "--no-loop", f"--endpos={format_lsn(upto)}", "-o",
                      "proto_version=1", "-o", f"publication_names={slot}", "-f", "/dev/null"]),
        check=True,
        capture_output=True,
    )  # fmt: skip
    return time.perf_counter() - started


def decode(conn: psycopg.Connection, slot: str, upto: int) -> tuple[float, int]:
    started, count = time.perf_counter(), 0
    decoder = Decoder()
    for _, message in cdc_pg.peek(conn, slot, upto, None):
        done = decoder.feed(message)
        if done is not None:
            count += sum(1 for c in done.changes for _ in c.values.items())  # touch every value
    return time.perf_counter() - started, count


def run(spark, work: Path, props: dict[str, str], flow_id: int, snapshot_mark: str) -> float:
    from portal.pipeline import run_job
    from tests.unit.pipeline.helpers import publish, spec

    job = spec(work, props, flow_id=flow_id, execution_id=2)
    job["previous_watermarks"] = {"bench.items": snapshot_mark}
    started = time.perf_counter()
    states = run_job(spark, job)
    errors = [s.get("error") for s in states if s.get("error")]
    if errors:
        raise SystemExit(f"the cdc run failed: {errors[0]}")
    publish(job, states, {})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=400_000)
    args = parser.parse_args()
    rows = args.changes // 2
    from portal.pipeline.session import get_or_create_spark

    spark = get_or_create_spark(
        "local[2]", "bench-cdc", {"spark.ui.enabled": "false", "spark.driver.memory": "2g"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    with private_server() as admin_url, tempfile.TemporaryDirectory() as tmp:
        server = admin_url.rsplit("/", 1)[0]
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute("CREATE DATABASE bench")
        conn = psycopg.connect(f"{server}/bench", autocommit=True)
        conn.execute("CREATE SCHEMA bench")
        conn.execute(
            "CREATE TABLE bench.items (id bigint PRIMARY KEY, name text, price numeric(12,2), n int)"
        )
        url = "jdbc:" + server.replace("postgres://postgres@", "postgresql://") + "/bench"
        common = {
            "source.class": "portal.pipeline.sources.cdc.CdcSource",
            "source.jdbc.url": url,
            "source.conn.username": "postgres",
            "source.cdc.tables": "bench.items",
        }
        # Flowport's slots (one per destination flow) and the floor's, all before the changes; the
        # empty snapshot runs create them.
        marks = {}
        for flow_id in (1, 2):
            from portal.pipeline import run_job
            from tests.unit.pipeline.helpers import spec

            job = spec(
                Path(tmp) / f"s{flow_id}", {**common, "data.publisher.final.dir": f"{tmp}/x"}, flow_id=flow_id
            )
            states = run_job(spark, job)
            marks[flow_id] = states[0]["actual_high_watermark"]
        cdc_pg.ensure(conn, "fp_cdc_floor", ["bench.items"], "bench")
        ours = cdc_pg.slot_name(1, "tests", "pipeline")
        conn.execute(
            "INSERT INTO bench.items SELECT g, 'item ' || g, g %% 1000, 0 FROM generate_series(1, %s) g",
            (rows,),
        )
        conn.execute("UPDATE bench.items SET n = n + 1, price = price + 1")
        upto = cdc_pg.flushed(conn)
        changes = rows * 2
        print(f"{changes:,} row changes in 2 transactions", flush=True)

        floor_s = floor(server, "bench", "fp_cdc_floor", upto)
        decode_s, _ = decode(conn, ours, upto)
        parquet_s = run(spark, Path(tmp) / "p", {**common, "writer.output.format": "parquet",
                                                 "data.publisher.final.dir": f"{tmp}/out"}, 1, marks[1])  # fmt: skip
        dest_db = f"flowport_bench_cdc_{uuid.uuid4().hex[:6]}"
        with psycopg.connect(f"{DEST}/postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{dest_db}"')
        try:
            pg_props = {
                **common,
                "writer.output.format": "jdbc",
                "writer.jdbc.url": f"jdbc:postgresql://127.0.0.1:5432/{dest_db}",
                "writer.jdbc.username": "postgres",
                "writer.jdbc.table": "items",
                "writer.write.mode": "merge",
                "extract.primary.key.fields": "id",
                "extract.delta.fields": "_cdc_position",
                "writer.merge.delete.column": "_cdc_deleted",
            }
            postgres_s = run(spark, Path(tmp) / "q", pg_props, 2, marks[2])
        finally:
            with psycopg.connect(f"{DEST}/postgres", autocommit=True) as admin:
                admin.execute(f'DROP DATABASE "{dest_db}" WITH (FORCE)')
        conn.close()
    spark.stop()
    print(
        f"  {'pg_recvlogical to /dev/null (floor)':<40} {floor_s:7.2f} s {changes / floor_s:>12,.0f} changes/s"
    )
    for label, took in (("decode (peek + pgoutput)", decode_s), ("into Parquet (a whole run)", parquet_s),
                        ("into PostgreSQL, merged (a whole run)", postgres_s)):  # fmt: skip
        print(
            f"  {label:<40} {took:7.2f} s {changes / took:>12,.0f} changes/s   {took / floor_s:5.1f}x the floor",
            flush=True,
        )


if __name__ == "__main__":
    main()
