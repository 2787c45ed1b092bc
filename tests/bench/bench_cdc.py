"""Change data capture throughput from one PostgreSQL slot, against ``pg_recvlogical`` reading the
same changes to /dev/null in the same run (the floor: the server's own client, no decoding of rows).

Standalone (not a pytest test). A private server with ``wal_level=logical`` (tests/pg_logical.py)
gets a table of CHANGES/2 rows inserted and then all updated (CHANGES row changes in two
transactions), captured by two slots made before the changes: one read by ``pg_recvlogical
--endpos`` (pgoutput, to /dev/null), one by Flowport:

* ``decode``: the cdc source's read alone: ``pg_logical_slot_peek_binary_changes`` and the bulk
  pgoutput decoder (:mod:`portal.pipeline.cdc.pgoutput_batch`), every change's values into Arrow columns;
* ``into Parquet``: a whole cdc run on Spark (``local[2]``) whose changes land in a Parquet change
  log, planning (peek, decode, staging) to publish;
* ``into PostgreSQL``: the same run merged by key into a table of ``BENCH_PG_SERVER``'s PostgreSQL;
* ``MariaDB binlog``: a private MariaDB server (tests/mariadb_binlog.py) logs ``--mariadb-changes``
  row changes the same way (an insert of half, an update of them), read by the cdc source's binlog
  reader (:func:`portal.pipeline.cdc.mysql.changes`, one connection, every change's values) against
  ``mysqlbinlog --read-from-remote-server`` reading the same binlog to /dev/null (its floor).

A run has a fixed cost (Spark's job and stages, the destination's checks and commit steps) besides
its cost per change: before the measured changes come 1,000 more (``SMALL``), and a whole run of
those alone is reported as the fixed cost beside the rate beyond it. Each round measures the floor,
the decode, and both destinations (a fresh database each round); the figures are the medians of
``--rounds`` rounds, with the load average.

Goal: >= 20,000 changes/s and within 3x of the floor.

    .venv/bin/python tests/bench/bench_cdc.py [--changes N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from portal.pipeline.cdc import pg as cdc_pg  # noqa: E402
from portal.pipeline.cdc.pgoutput import format_lsn  # noqa: E402
from portal.pipeline.cdc.pgoutput_batch import BatchDecoder  # noqa: E402
from tests.pg_logical import _as_postgres, _bin, private_server  # noqa: E402

DEST = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
SMALL = 1_000  # changes of the run that measures a run's fixed cost


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
    decoder = BatchDecoder()
    for messages in cdc_pg.peek_batches(conn, slot, upto, None):
        count += sum(len(rows) for rows in decoder.feed(messages).rows)
    return time.perf_counter() - started, count


def run(
    spark, work: Path, props: dict[str, str], flow_id: int, since: str, execution: int
) -> tuple[float, str]:
    """A whole cdc run from ``since`` (the table's watermark), published; its time and new watermark."""
    from portal.pipeline import run_job
    from tests.unit.pipeline.helpers import publish, spec

    job = spec(work, props, flow_id=flow_id, execution_id=execution)
    job["previous_watermarks"] = {"bench.items": since}
    started = time.perf_counter()
    states = run_job(spark, job)
    errors = [s.get("error") for s in states if s.get("error")]
    if errors:
        raise SystemExit(f"the cdc run failed: {errors[0]}")
    publish(job, states, {})
    return time.perf_counter() - started, states[0]["actual_high_watermark"]


def mariadb(changes: int) -> tuple[float, float, int]:
    """The MariaDB row: ``(mysqlbinlog's seconds, the binlog reader's seconds, changes read)``."""
    import pymysql

    from portal.pipeline.cdc import mysql as cdc_mysql
    from tests.mariadb_binlog import private_server as mariadb_server

    half = changes // 2
    with mariadb_server() as where:
        conn = pymysql.connect(**where, password="", autocommit=True)  # type: ignore[arg-type]
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE bench")
            cur.execute(
                "CREATE TABLE bench.items (id bigint PRIMARY KEY, name text, price decimal(12,2), n int)"
            )
            start = cdc_mysql.current(conn)
            for low in range(0, half, 5_000):
                values = ",".join(
                    f"({g}, 'item {g}', {g % 1000}, 0)" for g in range(low, min(half, low + 5_000))
                )
                cur.execute(f"INSERT INTO bench.items VALUES {values}")  # noqa: S608
            cur.execute("UPDATE bench.items SET n = n + 1, price = price + 1")
        upto = cdc_mysql.current(conn)
        conn.close()
        started = time.perf_counter()
        subprocess.run(
            ["mysqlbinlog", "--read-from-remote-server", "-h", str(where["host"]), "-P", str(where["port"]),
             "-u", "root", "--to-last-log", "binlog.000001"],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        floor_s = time.perf_counter() - started
        server = cdc_mysql.Server(str(where["host"]), int(str(where["port"])), "bench", "root", "")
        started = time.perf_counter()
        read = sum(1 for _ in cdc_mysql.changes(server, "bench", start, upto, ["bench.items"]))
        return floor_s, time.perf_counter() - started, read


def pg_props(common: dict[str, str], dest_db: str) -> dict[str, str]:
    return {
        **common,
        "writer.output.format": "jdbc",
        "writer.jdbc.url": f"jdbc:postgresql://{DEST.split('@', 1)[1]}/{dest_db}",
        "writer.jdbc.username": "postgres",
        "writer.jdbc.table": "items",
        "writer.write.mode": "merge",
        "extract.primary.key.fields": "id",
        "extract.delta.fields": "_cdc_position",
        "writer.merge.delete.column": "_cdc_deleted",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mariadb-changes", type=int, default=100_000)
    args = parser.parse_args()
    rows, small = args.changes // 2, SMALL // 2
    from portal.pipeline import run_job
    from portal.pipeline.session import get_or_create_spark
    from tests.unit.pipeline.helpers import spec

    spark = get_or_create_spark(
        "local[2]", "bench-cdc", {"spark.ui.enabled": "false", "spark.driver.memory": "2g"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    took: dict[str, list[float]] = {
        k: [] for k in ("floor", "decode", "parquet", "parquet_fixed", "pg", "pg_fixed")
    }
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
        # Flowport's slots (one per destination flow and round: a run moves its slot to where it
        # starts) and the floor's (one per round: pg_recvlogical consumes what it reads), all before
        # the changes; the empty snapshot runs create Flowport's.
        marks = {}
        for r in range(args.rounds):
            for flow_id in (10 * r + 1, 10 * r + 2):
                props = {**common, "data.publisher.final.dir": f"{tmp}/x"}
                job = spec(Path(tmp) / f"s{flow_id}", props, flow_id=flow_id)
                marks[flow_id] = run_job(spark, job)[0]["actual_high_watermark"]
            cdc_pg.ensure(conn, f"fp_cdc_floor_{r}", ["bench.items"], "bench")
        # A small set first (a whole run of it is the fixed cost), then the measured set; each is an
        # insert of half its rows and an update of them, two transactions.
        for first, count in ((1, small), (small + 1, rows)):
            conn.execute(
                "INSERT INTO bench.items SELECT g, 'item ' || g, g %% 1000, 0 FROM generate_series(%s::bigint, %s::bigint) g",
                (first, first + count - 1),
            )
            conn.execute("UPDATE bench.items SET n = n + 1, price = price + 1 WHERE id >= %s", (first,))
        upto = cdc_pg.flushed(conn)
        changes, everything = rows * 2, (rows + small) * 2
        print(
            f"{changes:,} row changes in 2 transactions (after {SMALL:,} in 2 more), {args.rounds} rounds",
            flush=True,
        )
        limit = {"source.cdc.max.changes": str(SMALL)}  # the small set's two transactions, no more

        for r in range(args.rounds):
            took["floor"].append(floor(server, "bench", f"fp_cdc_floor_{r}", upto))
            parquet_flow, pg_flow = 10 * r + 1, 10 * r + 2
            took["decode"].append(decode(conn, cdc_pg.slot_name(parquet_flow, "tests", "pipeline"), upto)[0])
            parquet = {
                **common,
                "writer.output.format": "parquet",
                "data.publisher.final.dir": f"{tmp}/out{r}",
            }
            t, after_small = run(
                spark, Path(tmp) / f"ps{r}", {**parquet, **limit}, parquet_flow, marks[parquet_flow], 2
            )
            took["parquet_fixed"].append(t)
            took["parquet"].append(run(spark, Path(tmp) / f"p{r}", parquet, parquet_flow, after_small, 3)[0])
            dest_db = f"flowport_bench_cdc_{uuid.uuid4().hex[:6]}"
            with psycopg.connect(f"{DEST}/postgres", autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{dest_db}"')
            try:
                props = pg_props(common, dest_db)
                t, after_small = run(
                    spark, Path(tmp) / f"qs{r}", {**props, **limit}, pg_flow, marks[pg_flow], 4
                )
                took["pg_fixed"].append(t)
                took["pg"].append(run(spark, Path(tmp) / f"q{r}", props, pg_flow, after_small, 5)[0])
                with psycopg.connect(f"{DEST}/{dest_db}") as dest:
                    found = dest.execute("SELECT count(*), sum(n), sum(price) FROM items").fetchone()
                expected = (rows + small, rows + small, sum(g % 1000 + 1 for g in range(1, rows + small + 1)))
                if found is None or tuple(int(v) for v in found) != expected:
                    raise SystemExit(f"the merged table holds {found}, not {expected}")
            finally:
                with psycopg.connect(f"{DEST}/postgres", autocommit=True) as admin:
                    admin.execute(f'DROP DATABASE "{dest_db}" WITH (FORCE)')
            print(f"  round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in took.items()), flush=True)
        conn.close()
    spark.stop()
    mid = {k: statistics.median(v) for k, v in took.items()}
    load = os.getloadavg()
    print(f"medians of {args.rounds}, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}:")
    print(
        f"  {'pg_recvlogical to /dev/null (floor)':<40} {mid['floor']:7.2f} s {everything / mid['floor']:>12,.0f} changes/s"
    )
    line = "  {:<40} {:7.2f} s {:>12,.0f} changes/s   {:5.1f}x the floor"
    per_floor = mid["floor"] / everything  # the floor's time per change
    print(
        line.format(
            "decode (peek + pgoutput)",
            mid["decode"],
            everything / mid["decode"],
            mid["decode"] / everything / per_floor,
        )
    )
    for label, key in (
        ("into Parquet (a whole run)", "parquet"),
        ("into PostgreSQL, merged (a whole run)", "pg"),
    ):
        whole, fixed = mid[key], mid[f"{key}_fixed"]
        print(line.format(label, whole, changes / whole, whole / changes / per_floor))
        net = whole - fixed
        beyond = (
            f"{changes / net:,.0f} changes/s = {net / changes / per_floor:.1f}x the floor"
            if net > 0
            else "n/a"
        )
        print(f"  {'':<4}a run of {SMALL:,} changes (fixed cost): {fixed:.2f} s; beyond it {beyond}")

    rounds = [mariadb(args.mariadb_changes) for _ in range(args.rounds)]
    floor_s, read_s = (statistics.median(r[i] for r in rounds) for i in range(2))
    read = rounds[0][2]
    if read != args.mariadb_changes // 2 * 2:
        raise SystemExit(f"the binlog reader read {read} changes, not {args.mariadb_changes // 2 * 2}")
    load = os.getloadavg()
    print(f"MariaDB binlog, {read:,} changes, medians of {args.rounds}, load average {load[0]:.1f}:")
    print(f"  {'mysqlbinlog to /dev/null (floor)':<40} {floor_s:7.2f} s {read / floor_s:>12,.0f} changes/s")
    print(line.format("binlog reader (cdc_mysql.changes)", read_s, read / read_s, read_s / floor_s))


if __name__ == "__main__":
    main()
