"""Write modes against a plain append in the same run: the publish step of each mode on one
dataset of ROWS rows (default 10,000,000), on PostgreSQL and on a Parquet files destination.

Standalone (not a pytest test). What is timed is the commit step the mode changes (the Spark read
and write before it are the same for every mode):

* PostgreSQL (a throw-away database): ``jdbc_publish`` of
  - a whole run of ROWS rows read again with 1 % of them changed, merged into the ROWS-row keyed
    table, against the same number of new rows appended to it (goal <= 2x);
  - append of 1 % new rows into the ROWS-row table, against merge of only the 1 % changed rows
    (goal <= 2x), and against a merge of 1 % rows read again unchanged (a re-run or a backfill:
    nothing to rewrite);
  - append of ROWS rows (a full run's rows), against overwrite with the same ROWS rows (goal <= 1.1x):
    into a table that is only its rows (the staging table is renamed to it) and into one with a
    definition of its own (a comment here; its rows are copied after a TRUNCATE).
* MariaDB (``--mariadb host:port``; a throw-away database): the same merges against the same append.
* Parquet files: ``fs_rename`` of the run's files (append) against ``fs_replace`` (overwrite: the same
  files and one folder exchange; merge: the stored dataset rewritten with 1 % changed rows, which
  a files destination cannot do in place) — merge is also shown against writing the dataset once.

Each timed PostgreSQL step starts from a ``CHECKPOINT``; the rounds (default 3) alternate which of a
pair runs first, and each figure is the median of its rounds.

    .venv/bin/python tests/bench/bench_write_modes.py [--rows N] [--repeat R] [--only pg|files|mariadb]
        [--pg postgres://user@host:port] [--mariadb host:port]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PG_DEFAULT = "postgres://postgres@127.0.0.1:5432"
DB = "flowport_bench_write_modes"


# CPU seconds of the PostgreSQL backends the timed step used, read as each connection closes (a
# local server only): on a shared machine the wall clock mostly measures the queue for the cores.
BACKEND_CPU: list[float] = []
CPU_OF_LAST: list[float] = [0.0]


def _backend_cpu(pid: int) -> float | None:
    """User + system CPU seconds of a local PostgreSQL backend (None if it is not on this machine)."""
    try:
        if Path(f"/proc/{pid}/comm").read_text().strip() != "postgres":
            return None
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def watch_backends() -> None:
    import psycopg

    close = psycopg.Connection.close

    def closing(self: psycopg.Connection) -> None:
        if not self.closed:
            used = _backend_cpu(self.info.backend_pid)
            if used is not None:
                BACKEND_CPU.append(used)
        close(self)

    psycopg.Connection.close = closing  # type: ignore[method-assign]


def timed(label: str, run, before=None) -> float:
    """``run`` timed (``before`` runs first, untimed); the backends' CPU goes to ``CPU_OF_LAST``."""
    if before is not None:
        before()
    BACKEND_CPU.clear()
    started = time.perf_counter()
    run()
    took = time.perf_counter() - started
    CPU_OF_LAST[0] = sum(BACKEND_CPU)
    cpu = f"  (backend CPU {CPU_OF_LAST[0]:.2f} s)" if BACKEND_CPU else ""
    print(f"  {label:<52} {took:8.2f} s{cpu}", flush=True)
    return took


def pg_bench(server: str, rows: int, flip: bool = False) -> list[tuple[str, float, float, float]]:
    """One round on PostgreSQL; ``flip`` runs each pair the other way round (the rounds alternate)."""
    import psycopg

    from portal.pipeline.destinations.commit_steps import CommitSequence

    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{DB}"')
    host = server.split("//", 1)[1]
    user, _, hostport = host.rpartition("@")
    url = f"jdbc:postgresql://{hostport}/{DB}"
    conn = psycopg.connect(f"{server}/{DB}", autocommit=True)
    changed = max(1, rows // 100)

    def table(name: str, start: int, count: int, tag: str, key: bool = False, changed_from: int = 0) -> None:
        """``count`` rows from id ``start``, tagged ``tag`` (from id ``changed_from`` on: 'changed')."""
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        tagged = (
            f"CASE WHEN g >= {changed_from} THEN 'changed' ELSE '{tag}' END" if changed_from else f"'{tag}'"
        )
        conn.execute(
            f"CREATE TABLE {name} AS SELECT g::bigint AS id, 'name-' || g AS name, (g % 1000)::numeric(12,2) "  # noqa: S608
            f"AS amount, {tagged}::text AS tag FROM generate_series({start}, {start + count - 1}) g"
        )
        if key:
            conn.execute(f"CREATE UNIQUE INDEX {name}_fp_key ON {name} (id)")

    def checkpoint() -> None:
        """Before each timed step: no checkpoint is half done by the tables just made, and a merge
        pays the full-page images of the pages it changes, as in production (the first change of a
        page after each checkpoint logs the whole page)."""
        conn.execute("CHECKPOINT")

    def publish(execution: int, mode: str, staging: str, count: int, target: str) -> None:
        step = {
            "type": "jdbc_publish", "dataset_urn": "d", "branch": 0, "url": url, "user": user or None,
            "target_table": target, "marker_table": "bench_marker", "staging_tables": [staging],
            "rows": count, "execution_id": execution, "job_name": "bench", "write_mode": mode,
            "merge_keys": ["id"] if mode == "merge" else [], "merge_order": None,
        }  # fmt: skip
        CommitSequence.from_dicts([step]).run()

    print(f"PostgreSQL, {rows:,} rows:", flush=True)
    table("t_append", 1, rows, "a", key=True)
    table("t_merge", 1, rows, "a", key=True)
    table("t_full", 1, rows, "a")
    table("t_over", 1, rows, "a")
    conn.execute("VACUUM ANALYZE")
    table("s1", rows + 1, changed, "new")
    table("s2", rows - changed + 1, changed, "changed")  # the last 1 % of the keys, changed
    table("s6", rows - 2 * changed + 1, changed, "a")  # the 1 % before them, read again unchanged
    times: dict[str, float] = {}

    def small_append() -> None:
        times["append"] = timed(
            f"append {changed:,} new rows",
            lambda: publish(1, "append", "s1", changed, "t_append"),
            checkpoint,
        )
        times["append cpu"] = CPU_OF_LAST[0]

    def small_merges() -> None:
        times["merge"] = timed(
            f"merge {changed:,} changed rows",
            lambda: publish(2, "merge", "s2", changed, "t_merge"),
            checkpoint,
        )
        times["merge cpu"] = CPU_OF_LAST[0]
        times["same"] = timed(
            f"merge {changed:,} rows read again unchanged",
            lambda: publish(6, "merge", "s6", changed, "t_merge"),
            checkpoint,
        )
        times["same cpu"] = CPU_OF_LAST[0]

    for run in (small_merges, small_append) if flip else (small_append, small_merges):
        run()
    append_small, merge, same = times["append"], times["merge"], times["same"]
    # A whole run read again with 1 % changed (a full re-read of the source, merged), against the same
    # run's rows appended: both into a keyed table of ROWS rows.
    table("t_whole_merge", 1, rows, "a", key=True)
    table("t_whole_append", 1, rows, "a", key=True)
    conn.execute("VACUUM ANALYZE t_whole_merge, t_whole_append")
    table("s7", 1, rows, "a", changed_from=rows - changed + 1)
    table("s8", rows + 1, rows, "new")

    def whole_merge() -> None:
        times["whole merge"] = timed(
            f"merge a run of {rows:,} rows, 1 % changed",
            lambda: publish(7, "merge", "s7", rows, "t_whole_merge"),
            checkpoint,
        )

    def whole_append() -> None:
        times["whole append"] = timed(
            f"append a run of {rows:,} rows (keyed table)",
            lambda: publish(8, "append", "s8", rows, "t_whole_append"),
            checkpoint,
        )

    for run in (whole_append, whole_merge) if flip else (whole_merge, whole_append):
        run()
    for name in ("t_whole_merge", "t_whole_append"):
        conn.execute(f"DROP TABLE {name}")
    table("s3", 1, rows, "b")
    table("s4", 1, rows, "b")

    def full_append() -> None:
        times["all"] = timed(
            f"append {rows:,} rows (a full run)",
            lambda: publish(3, "append", "s3", rows, "t_full"),
            checkpoint,
        )

    def full_overwrite() -> None:
        times["over"] = timed(
            f"overwrite with {rows:,} rows (staging renamed)",
            lambda: publish(4, "overwrite", "s4", rows, "t_over"),
            checkpoint,
        )

    for run in (full_overwrite, full_append) if flip else (full_append, full_overwrite):
        run()
    append_all, overwrite = times["all"], times["over"]
    table("t_kept", 1, rows, "a")
    conn.execute("COMMENT ON TABLE t_kept IS 'a table with a definition of its own: its rows are copied'")
    table("s5", 1, rows, "b")
    copied = timed(
        f"overwrite with {rows:,} rows (copied)",
        lambda: publish(5, "overwrite", "s5", rows, "t_kept"),
        checkpoint,
    )
    conn.close()
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    return [
        ("PostgreSQL merge 1 % vs append 1 %", merge, append_small, 2.0),
        ("PostgreSQL merge 1 % vs append 1 %, backend CPU", times["merge cpu"], times["append cpu"], 2.0),
        ("PostgreSQL merge 1 % read again unchanged vs append 1 %", same, append_small, 2.0),
        (
            "PostgreSQL merge 1 % read again unchanged vs append 1 %, backend CPU",
            times["same cpu"],
            times["append cpu"],
            2.0,
        ),
        (
            "PostgreSQL merge of a run read again with 1 % changed vs its append",
            times["whole merge"],
            times["whole append"],
            2.0,
        ),
        ("PostgreSQL overwrite vs append, full run", overwrite, append_all, 1.1),
        ("PostgreSQL overwrite of a commented table (copied) vs append", copied, append_all, 1.1),
    ]


def mariadb_bench(server: str, rows: int, rounds: int) -> list[list[tuple[str, float, float, float]]]:
    """MariaDB (``host:port``, root): the tables are made once (10 M rows take minutes to load), and
    each round merges and appends key ranges of its own, alternating which goes first."""
    import pymysql

    from portal.pipeline.destinations.commit_steps import CommitSequence

    host, _, port = server.partition(":")
    conn = pymysql.connect(host=host, port=int(port or 3306), user="root", autocommit=True)
    cur = conn.cursor()
    cur.execute(f"DROP DATABASE IF EXISTS {DB}")
    cur.execute(f"CREATE DATABASE {DB}")
    cur.execute(f"USE {DB}")
    changed = max(1, rows // 100)

    def table(name: str, start: int, count: int, tag: str) -> None:
        cur.execute(f"DROP TABLE IF EXISTS {name}")
        cur.execute(f"CREATE TABLE {name} (id BIGINT, name TEXT, amount DECIMAL(12,2), tag TEXT)")
        cur.execute(
            f"INSERT INTO {name} SELECT seq, CONCAT('name-', seq), seq % 1000, '{tag}' "  # noqa: S608
            f"FROM seq_{start}_to_{start + count - 1}"
        )

    def publish(execution: int, mode: str, staging: str, count: int, target: str) -> None:
        step = {
            "type": "jdbc_publish", "dataset_urn": "d", "branch": 0, "url": f"jdbc:mariadb://{server}/{DB}",
            "user": "root", "target_table": target, "marker_table": "bench_marker", "staging_tables": [staging],
            "rows": count, "execution_id": execution, "job_name": "bench", "write_mode": mode,
            "merge_keys": ["id"] if mode == "merge" else [], "merge_order": None,
        }  # fmt: skip
        CommitSequence.from_dicts([step]).run()

    print(f"MariaDB, {rows:,} rows:", flush=True)
    for name in ("t_append", "t_merge"):
        table(name, 1, rows, "a")
        cur.execute(f"CREATE UNIQUE INDEX {name}_fp_key ON {name} (id)")
    results = []
    for n in range(rounds):
        table("s1", rows + 1 + n * changed, changed, "new")
        table("s2", rows - (2 * n + 1) * changed + 1, changed, "changed")
        table("s6", rows - (2 * n + 2) * changed + 1, changed, "a")  # stored as they are
        took: dict[str, float] = {}
        runs = {
            "append": lambda n=n: publish(10 * n + 1, "append", "s1", changed, "t_append"),
            "merge": lambda n=n: publish(10 * n + 2, "merge", "s2", changed, "t_merge"),
            "same": lambda n=n: publish(10 * n + 3, "merge", "s6", changed, "t_merge"),
        }
        for what in ("merge", "same", "append") if n % 2 else ("append", "merge", "same"):
            label = {"append": "append", "merge": "merge changed", "same": "merge unchanged"}[what]
            took[what] = timed(f"{label} {changed:,} rows (round {n + 1})", runs[what])
        results.append(
            [
                ("MariaDB merge 1 % vs append 1 %", took["merge"], took["append"], 2.0),
                ("MariaDB merge 1 % read again unchanged vs append 1 %", took["same"], took["append"], 2.0),
            ]
        )
    cur.execute(f"DROP DATABASE IF EXISTS {DB}")
    conn.close()
    return results


def files_bench(rows: int) -> list[tuple[str, float, float, float]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from portal.pipeline.destinations.commit_steps import CommitSequence

    changed = max(1, rows // 100)
    tmp = Path(tempfile.mkdtemp(prefix="bench-write-modes-"))
    per_file = 1_000_000

    def write(folder: Path, start: int, count: int, tag: str) -> list[dict]:
        folder.mkdir(parents=True, exist_ok=True)
        files = []
        for n, first in enumerate(range(start, start + count, per_file)):
            ids = pa.array(range(first, min(first + per_file, start + count)), pa.int64())
            table = pa.table(
                {"id": ids, "name": pa.compute.cast(ids, pa.string()), "tag": pa.array([tag] * len(ids))}
            )
            path = folder / f"part-{n:05d}.parquet"
            pq.write_table(table, path)
            files.append({"src": str(path), "relative": path.name, "size": path.stat().st_size})
        return files

    def step(mode: str, final: Path, files: list[dict], execution: int) -> dict:
        if mode == "append":
            return {
                "type": "fs_rename",
                "src": files[0]["src"],
                "dst": str(final / f"run{execution}.parquet"),
            }
        return {
            "type": "fs_replace", "dataset_urn": "d", "branch": 0, "final": str(final), "mode": mode,
            "format": "PARQUET", "files": files, "token": f"bench:{execution}:d", "partitions": False,
            "merge_keys": ["id"], "merge_order": None, "delete_column": None,
        }  # fmt: skip

    print(f"Parquet files, {rows:,} rows:", flush=True)
    dataset_write = timed(
        f"write the {rows:,}-row dataset (reference)", lambda: write(tmp / "lake_a", 1, rows, "a")
    )
    write(tmp / "lake_m", 1, rows, "a")
    small = write(tmp / "run1", rows + 1, changed, "new")
    append_small = timed(
        f"append {changed:,} new rows",
        lambda: CommitSequence.from_dicts([step("append", tmp / "lake_a", small, 1)]).run(),
    )
    merged = write(tmp / "run2", rows - changed + 1, changed, "changed")
    merge = timed(
        f"merge {changed:,} changed rows",
        lambda: CommitSequence.from_dicts([step("merge", tmp / "lake_m", merged, 2)]).run(),
    )
    full = write(tmp / "run3", 1, rows, "b")
    append_all = timed(
        f"append {rows:,} rows (a full run)",
        lambda: CommitSequence.from_dicts(
            [
                {**step("append", tmp / "lake_a", [f], 3), "dst": str(tmp / "lake_a" / f"run3-{i}.parquet")}
                for i, f in enumerate(full)
            ]
        ).run(),
    )
    full = write(tmp / "run4", 1, rows, "b")
    overwrite = timed(
        f"overwrite with {rows:,} rows",
        lambda: CommitSequence.from_dicts([step("overwrite", tmp / "lake_m", full, 4)]).run(),
    )
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return [
        ("Parquet merge 1 % vs append 1 %", merge, append_small, 2.0),
        ("Parquet merge 1 % vs writing the dataset once", merge, dataset_write, 2.0),
        ("Parquet overwrite vs append, full run", overwrite, append_all, 1.1),
    ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--pg", default=PG_DEFAULT)
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="rounds (each pair runs the other way round in every other round); each figure is the median",
    )
    parser.add_argument("--only", choices=("pg", "files", "mariadb"), help="one destination's rows only")
    parser.add_argument("--mariadb", metavar="HOST:PORT", help="also a MariaDB server (root, no password)")
    args = parser.parse_args()
    watch_backends()
    repeat = max(1, args.repeat)
    rounds = [
        (pg_bench(args.pg, args.rows, flip=n % 2 == 1) if args.only in (None, "pg") else [])
        + (files_bench(args.rows) if args.only in (None, "files") else [])
        for n in range(repeat)
    ]
    if args.mariadb and args.only in (None, "mariadb"):
        for mine, theirs in zip(rounds, mariadb_bench(args.mariadb, args.rows, repeat), strict=True):
            mine.extend(theirs)
    results = [
        (label, statistics.median(r[i][1] for r in rounds), statistics.median(r[i][2] for r in rounds), goal)
        for i, (label, _, _, goal) in enumerate(rounds[0])
    ]
    print(f"\n{len(rounds)} round(s), medians; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}:")
    print("\n| comparison | mode | reference | ratio (rounds) | goal |\n|---|---|---|---|---|")
    for i, (label, took, reference, goal) in enumerate(results):
        ratio = took / reference if reference else float("inf")
        verdict = "met" if ratio <= goal else "missed"
        each = ", ".join(f"{r[i][1] / r[i][2]:.2f}x" if r[i][2] else "-" for r in rounds)
        print(
            f"| {label} | {took:.2f} s | {reference:.2f} s | {ratio:.2f}x ({each}) | <= {goal}x ({verdict}) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
