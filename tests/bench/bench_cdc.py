"""Change data capture throughput from one PostgreSQL slot, against two floors read in the same
run: ``pg_recvlogical`` reading the same changes to /dev/null (the streaming floor: the server's
own client over the walsender, no decoding of rows) and the fair floor, Flowport's own transport
(``pg_logical_slot_peek_binary_changes`` through a binary server-side cursor) fetched to nowhere.

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

Every figure is taken twice in each round, interleaved: at the machine's own load and beside
``--load`` busy processes the benchmark starts itself (4 by default: users' workers share their
machines), each against the floors measured beside the same load. The runs are a warm worker's
(one SparkSession for the whole benchmark, started before the first round): they include the
planning, the read, the staging and the publish, and the slot is advanced by the next run's start.

A run has a fixed cost (Spark's job and stages, the destination's checks and commit steps) besides
its cost per change: before the measured changes come 1,000 more (``SMALL``), and a whole run of
those alone is reported as the fixed cost beside the rate beyond it. Each round measures the floor,
the decode, and both destinations (a fresh database each round); the figures are the medians of
``--rounds`` rounds, with the load average.

Goal: >= 20,000 changes/s and a whole run within 3x of the fair floor, at both loads.

    .venv/bin/python tests/bench/bench_cdc.py [--changes N] [--rounds R] [--load N] [--only mariadb]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
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


@contextlib.contextmanager
def busy(cores: int) -> Iterator[None]:
    """``cores`` processes spinning on the CPU while the block runs (0: the machine as it is)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        if spinners:
            time.sleep(1.0)  # scheduled and spinning before anything is timed
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def transport(conn: psycopg.Connection, slot: str, upto: int) -> float:
    """The fair floor: the cdc source's own transport (the peek through a binary server-side
    cursor, :func:`portal.pipeline.cdc.pg.peek_batches`) with the messages fetched to nowhere."""
    started = time.perf_counter()
    for _ in cdc_pg.peek_batches(conn, slot, upto, None):
        pass
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


def mariadb(changes: int, loads: list[int]) -> dict[int, tuple[float, float, int, float]]:
    """The MariaDB row, at each load: ``{load: (mysqlbinlog's seconds, the binlog reader's seconds,
    changes read, the load average after)}``."""
    import pymysql

    from portal.pipeline.cdc import mysql as cdc_mysql
    from tests.mariadb_binlog import private_server as mariadb_server

    half = changes // 2
    found = {}
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
        server = cdc_mysql.Server(str(where["host"]), int(str(where["port"])), "bench", "root", "")
        for cores in loads:
            with busy(cores):
                started = time.perf_counter()
                subprocess.run(
                    ["mysqlbinlog", "--read-from-remote-server", "-h", str(where["host"]), "-P",
                     str(where["port"]), "-u", "root", "--to-last-log", "binlog.000001"],
                    check=True, stdout=subprocess.DEVNULL,
                )  # fmt: skip
                floor_s = time.perf_counter() - started
                started = time.perf_counter()
                read = sum(1 for _ in cdc_mysql.changes(server, "bench", start, upto, ["bench.items"]))
                found[cores] = (floor_s, time.perf_counter() - started, read, os.getloadavg()[0])
    return found


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


KEYS = ("floor", "transport", "decode", "parquet", "parquet_fixed", "pg", "pg_fixed")


def postgres(args: argparse.Namespace, loads: list[int]) -> None:
    """The PostgreSQL rows: the floors, the decode and both destinations, at each load."""
    rows, small = args.changes // 2, SMALL // 2
    from portal.pipeline import run_job
    from portal.pipeline.spark.session import get_or_create_spark
    from tests.unit.pipeline.helpers import spec

    spark = get_or_create_spark(
        "local[2]", "bench-cdc", {"spark.ui.enabled": "false", "spark.driver.memory": "2g"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    took: dict[int, dict[str, list[float]]] = {cores: {k: [] for k in KEYS} for cores in loads}
    seen: dict[int, list[float]] = {cores: [] for cores in loads}  # load averages after each set
    sets = [(r, li, cores) for r in range(args.rounds) for li, cores in enumerate(loads)]
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
        # Flowport's slots (one per destination flow and set: a run moves its slot to where it
        # starts) and the floor's (one per set: pg_recvlogical consumes what it reads), all before
        # the changes; the empty snapshot runs create Flowport's.
        marks = {}
        for r, li, _ in sets:
            for flow_id in (100 * li + 10 * r + 1, 100 * li + 10 * r + 2):
                props = {**common, "data.publisher.final.dir": f"{tmp}/x"}
                job = spec(Path(tmp) / f"s{flow_id}", props, flow_id=flow_id)
                marks[flow_id] = run_job(spark, job)[0]["actual_high_watermark"]
            cdc_pg.ensure(conn, f"fp_cdc_floor_{li}_{r}", ["bench.items"], "bench")
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
            f"{changes:,} row changes in 2 transactions (after {SMALL:,} in 2 more), {args.rounds} rounds"
            f" at the machine's load and beside {args.load} busy processes, interleaved",
            flush=True,
        )
        limit = {"source.cdc.max.changes": str(SMALL)}  # the small set's two transactions, no more

        for r, li, cores in sets:
            mine = took[cores]
            parquet_flow, pg_flow = 100 * li + 10 * r + 1, 100 * li + 10 * r + 2
            parquet_slot = cdc_pg.slot_name(parquet_flow, "tests", "pipeline")
            dest_db = f"flowport_bench_cdc_{uuid.uuid4().hex[:6]}"
            with psycopg.connect(f"{DEST}/postgres", autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{dest_db}"')
            try:
                with busy(cores):
                    mine["floor"].append(floor(server, "bench", f"fp_cdc_floor_{li}_{r}", upto))
                    mine["transport"].append(transport(conn, parquet_slot, upto))
                    mine["decode"].append(decode(conn, parquet_slot, upto)[0])
                    parquet = {
                        **common,
                        "writer.output.format": "parquet",
                        "data.publisher.final.dir": f"{tmp}/out{li}{r}",
                    }
                    t, after_small = run(
                        spark,
                        Path(tmp) / f"ps{li}{r}",
                        {**parquet, **limit},
                        parquet_flow,
                        marks[parquet_flow],
                        2,
                    )
                    mine["parquet_fixed"].append(t)
                    mine["parquet"].append(
                        run(spark, Path(tmp) / f"p{li}{r}", parquet, parquet_flow, after_small, 3)[0]
                    )
                    props = pg_props(common, dest_db)
                    t, after_small = run(
                        spark, Path(tmp) / f"qs{li}{r}", {**props, **limit}, pg_flow, marks[pg_flow], 4
                    )
                    mine["pg_fixed"].append(t)
                    mine["pg"].append(run(spark, Path(tmp) / f"q{li}{r}", props, pg_flow, after_small, 5)[0])
                    seen[cores].append(os.getloadavg()[0])
                with psycopg.connect(f"{DEST}/{dest_db}") as dest:
                    found = dest.execute("SELECT count(*), sum(n), sum(price) FROM items").fetchone()
                expected = (rows + small, rows + small, sum(g % 1000 + 1 for g in range(1, rows + small + 1)))
                if found is None or tuple(int(v) for v in found) != expected:
                    raise SystemExit(f"the merged table holds {found}, not {expected}")
            finally:
                with psycopg.connect(f"{DEST}/postgres", autocommit=True) as admin:
                    admin.execute(f'DROP DATABASE "{dest_db}" WITH (FORCE)')
            print(
                f"  round {r + 1}, {cores} busy: "
                + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in mine.items())
                + f" (load {seen[cores][-1]:.1f})",
                flush=True,
            )
        conn.close()
    spark.stop()
    line = "  {:<44} {:7.2f} s {:>12,.0f} changes/s   {:5.1f}x the fair floor, {:4.1f}x the streaming one"
    for cores in loads:
        mid = {k: statistics.median(v) for k, v in took[cores].items()}
        where = f"beside {cores} busy processes" if cores else "at the machine's own load"
        print(
            f"medians of {args.rounds} {where}, load average {min(seen[cores]):.1f}-{max(seen[cores]):.1f}:"
        )
        print(
            f"  {'pg_recvlogical to /dev/null (streaming floor)':<44} {mid['floor']:7.2f} s"
            f" {everything / mid['floor']:>12,.0f} changes/s"
        )
        fair, stream = mid["transport"] / everything, mid["floor"] / everything  # seconds per change
        print(
            f"  {'peek cursor to nowhere (fair floor)':<44} {mid['transport']:7.2f} s"
            f" {everything / mid['transport']:>12,.0f} changes/s"
        )
        per = mid["decode"] / everything
        print(line.format("decode (peek + pgoutput)", mid["decode"], 1 / per, per / fair, per / stream))
        for label, key in (
            ("into Parquet (a whole run, warm worker)", "parquet"),
            ("into PostgreSQL, merged (a whole run)", "pg"),
        ):
            whole, fixed = mid[key], mid[f"{key}_fixed"]
            per = whole / changes
            print(line.format(label, whole, 1 / per, per / fair, per / stream))
            net = whole - fixed
            beyond = (
                f"{changes / net:,.0f} changes/s = {net / changes / fair:.1f}x the fair floor"
                if net > 0
                else "n/a"
            )
            print(f"  {'':<4}a run of {SMALL:,} changes (fixed cost): {fixed:.2f} s; beyond it {beyond}")


def binlog(args: argparse.Namespace, loads: list[int]) -> None:
    """The MariaDB row: the binlog reader against mysqlbinlog, at each load."""
    rounds = [mariadb(args.mariadb_changes, loads) for _ in range(args.rounds)]
    for cores in loads:
        floor_s, read_s = (statistics.median(r[cores][i] for r in rounds) for i in range(2))
        read = rounds[0][cores][2]
        if read != args.mariadb_changes // 2 * 2:
            raise SystemExit(f"the binlog reader read {read} changes, not {args.mariadb_changes // 2 * 2}")
        averages = [r[cores][3] for r in rounds]
        where = f"beside {cores} busy processes" if cores else "at the machine's own load"
        print(
            f"MariaDB binlog, {read:,} changes, medians of {args.rounds} {where},"
            f" load average {min(averages):.1f}-{max(averages):.1f}:"
        )
        print(
            f"  {'mysqlbinlog to /dev/null (floor)':<44} {floor_s:7.2f} s {read / floor_s:>12,.0f} changes/s"
        )
        print(
            f"  {'binlog reader (cdc_mysql.changes)':<44} {read_s:7.2f} s {read / read_s:>12,.0f} changes/s"
            f"   {read_s / floor_s:5.1f}x the floor"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mariadb-changes", type=int, default=100_000)
    parser.add_argument("--load", type=int, default=4, help="busy processes beside the second set")
    parser.add_argument("--only", choices=("postgres", "mariadb"), help="one server's rows alone")
    args = parser.parse_args()
    loads = [0, args.load] if args.load else [0]
    if args.only != "mariadb":
        postgres(args, loads)
    if args.only != "postgres":
        binlog(args, loads)


if __name__ == "__main__":
    main()
