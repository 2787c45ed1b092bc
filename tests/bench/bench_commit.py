"""Commit + recovery of one dataset with 10,000 output files.

Standalone (not a pytest test). For each database — a throw-away SQLite file
(the embedded mode) and, when a PostgreSQL server answers, a throw-away
PostgreSQL database — it runs itself in a subprocess that sets Django up on
it and times, on the local filesystem:

1. commit: `publish.commit()` of a dataset whose tasks wrote 10,000 files —
   plan, ALL 10,001 steps (10,000 fs_rename + high_watermark) written to the
   CommitStepStore in one transaction, run (verify, else execute), removed;
2. recovery: a run that wrote its 10,001 steps and died after 5,000 renames;
   `recovery.recover()` verifies every step, redoes the other 5,000 renames
   and the watermark, removes the steps and cleans the dead run's task output;
3. reference: plain `os.rename` of 10,000 files of the same layout.

Goal: commit + recovery <= 10 s. Prints the figures and the ratios.

    .venv/bin/python tests/bench/bench_commit.py [files] [--pg postgres://user@host:port]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES, GOAL_S, FILES_PER_TASK = 10_000, 10.0, 100
PG_DEFAULT = "postgres://postgres@127.0.0.1:5432"


def setup_django(database_url: str, tmp: str) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ["FLOWPORT_VAR_DIR"] = tmp
    os.environ["DATABASE_URL"] = database_url
    os.environ["LOG_LEVEL"] = "WARNING"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def write_task_output(work: Path, execution_id: int, files: int) -> list[dict]:
    """TaskStates of tasks that wrote `files` files, laid out like the file writer's."""
    states = []
    for task in range(files // FILES_PER_TASK):
        task_id = f"task_bench_{execution_id}_{task}"
        out = work / "task-output" / "bench" / str(execution_id) / task_id / "branch_0"
        out.mkdir(parents=True)
        written = []
        for n in range(FILES_PER_TASK):
            path = out / f"part-{n:05d}-{task_id}.json"
            path.write_text(f'{{"id": {task * FILES_PER_TASK + n}}}\n')
            written.append({"path": str(path), "size": path.stat().st_size})
        states.append(
            {
                "task_id": task_id,
                "job_name": "bench",
                "execution_id": execution_id,
                "dataset_urn": "events",
                "status": "SUCCEEDED",
                "low_watermark": str(task),
                "expected_high_watermark": str(task + 1),
                "actual_high_watermark": str(task + 1),
                "records_extracted": FILES_PER_TASK,
                "branches": [
                    {
                        "index": 0,
                        "name": "fork_0",
                        "status": "SUCCEEDED",
                        "output_dir": str(out),
                        "output_files": written,
                    }
                ],
                "work_unit": {"range_index": task, "range_count": files // FILES_PER_TASK},
            }
        )
    return states


def spec_for(tmp: Path, execution_id: int) -> dict:
    return {
        "job_name": "bench",
        "flow_group": "bench",
        "flow_name": "commit",
        "execution_id": execution_id,
        "work_dir": str(tmp / "work"),
        "properties": {"data.publisher.final.dir": str(tmp / "lake"), "job.commit.policy": "full"},
    }


def measure(label: str, database_url: str, files: int) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        setup_django(database_url, tmp_name)
        from portal.orchestration.models import CommitStepRecord, DatasetState
        from portal.orchestration.state import publish, recovery
        from portal.orchestration.state.commitstore import CommitStepStore, store_name_for
        from portal.pipeline.destinations.commit_steps import CommitStep
        from portal.pipeline.destinations.commitplan import plan_commit

        # 3. reference: plain renames of the same layout
        ref_src = write_task_output(tmp / "ref", 1, files)
        started = time.perf_counter()
        for state in ref_src:
            for f in state["branches"][0]["output_files"]:
                target = tmp / "ref-lake" / Path(f["path"]).name
                target.parent.mkdir(parents=True, exist_ok=True)
                os.rename(f["path"], target)
        raw = time.perf_counter() - started

        # 1. commit
        spec = spec_for(tmp, 1)
        states = write_task_output(tmp / "work", 1, files)
        started = time.perf_counter()
        results = publish.commit(spec, states)
        commit_s = time.perf_counter() - started
        assert results["events"].done and results["events"].executed == files + 1, results

        # 2. recovery after a crash half-way through the renames
        spec2 = spec_for(tmp, 2)
        states2 = write_task_output(tmp / "work", 2, files)
        plan = plan_commit(spec2, states2)
        publish.watermark_steps(spec2, states2, plan)
        store = CommitStepStore()
        started = time.perf_counter()
        store.put_all(
            store_name_for(spec2),
            "events",
            plan["events"],
            execution_id=2,
            job_name="bench",
            work_dir=spec2["work_dir"],
        )
        write_s = time.perf_counter() - started
        for step in plan["events"][: files // 2]:
            CommitStep.from_dict(step).execute()
        started = time.perf_counter()
        report = recovery.recover(spec2)
        recover_s = time.perf_counter() - started
        assert report.recovered["events"].executed == files - files // 2 + 1, report.to_dict()
        assert not CommitStepRecord.objects.exists()
        assert DatasetState.objects.get(dataset_urn="events").execution_id == 2
        published = sum(1 for _ in (tmp / "lake" / "events").rglob("*.json"))
        assert published == 2 * files, published

        total = commit_s + recover_s
        print(f"[{label}] {files} output files in {files // FILES_PER_TASK} tasks, one dataset")
        print(
            f"[{label}] commit (plan, {files + 1} steps stored in 1 transaction, run, removed): {commit_s:.2f} s"
        )
        print(
            f"[{label}]   of which writing the steps alone, as measured for the crashed run: {write_s:.2f} s"
        )
        print(
            f"[{label}] recovery (verify {files + 1} steps, redo {files - files // 2} renames + watermark, "
            f"remove, clean task output): {recover_s:.2f} s"
        )
        print(
            f"[{label}] reference, plain os.rename of {files} files: {raw:.2f} s; commit / raw = {commit_s / raw:.1f}x"
        )
        verdict = "met" if total <= GOAL_S * files / FILES else "NOT met"
        print(f"[{label}] commit + recovery = {total:.2f} s; goal <= {GOAL_S:.0f} s: {verdict}")


def pg_database(server: str) -> tuple[str, Callable[[], None]] | None:
    """A throw-away database on `server`, or None if it does not answer."""
    try:
        import psycopg
    except ImportError:
        return None
    name = f"flowport_bench_commit_{os.getpid()}"
    try:
        with psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=3) as conn:
            conn.execute(f"CREATE DATABASE {name}")
    except Exception as exc:  # no server: SQLite only
        print(f"(PostgreSQL at {server} not used: {type(exc).__name__})")
        return None

    def drop() -> None:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    return f"{server}/{name}", drop


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="?", type=int, default=FILES)
    parser.add_argument("--pg", default=os.environ.get("BENCH_PG_SERVER", PG_DEFAULT))
    parser.add_argument("--one", nargs=2, metavar=("LABEL", "DATABASE_URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        measure(args.one[0], args.one[1], args.files)
        return 0
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        targets = [("sqlite", f"sqlite:///{tmp}/bench.sqlite3")]
        pg = pg_database(args.pg)
        if pg:
            targets.append(("postgresql", pg[0]))
        try:
            for label, url in targets:
                run = [sys.executable, __file__, str(args.files), "--one", label, url]
                failures += subprocess.run(run, cwd=ROOT, check=False).returncode != 0
        finally:
            if pg:
                pg[1]()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
