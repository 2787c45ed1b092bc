"""Files source end to end: incremental runs by mtime+name watermark, skipped datasets, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.destinations.commitplan import plan_commit
from tests.unit.pipeline.helpers import NOW, read, run_and_publish, spec, write_csv

HEADER = "id,name,amount"


def _props(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "source.schema": "id INT, name STRING, amount DOUBLE",
        "data.publisher.final.dir": str(tmp_path / "lake"),
        **extra,
    }


def test_second_run_reads_only_new_files_including_same_mtime_ties(
    spark: SparkSession, tmp_path: Path
) -> None:
    landing = tmp_path / "landing" / "orders"
    write_csv(landing / "a.csv", HEADER, ["1,ann,10.0", "2,bob,20.0"], mtime=NOW - 100)
    write_csv(landing / "b.csv", HEADER, ["3,cid,30.0"], mtime=NOW - 50)
    watermarks: dict[str, str] = {}
    job = spec(tmp_path, _props(tmp_path), execution_id=1)

    states = run_and_publish(spark, job, watermarks)

    assert [s["status"] for s in states] == ["SUCCEEDED"]
    assert states[0]["records_extracted"] == 3
    assert states[0]["branches"][0]["records_written"] == 3
    assert states[0]["actual_high_watermark"] == states[0]["expected_high_watermark"]
    assert watermarks["orders"].endswith(":b.csv")
    lake = tmp_path / "lake" / "orders"
    assert sorted(r.id for r in read(spark, lake).collect()) == [1, 2, 3]

    # A new file with the SAME mtime as the watermark file but a later name, and one newer file.
    write_csv(landing / "c.csv", HEADER, ["4,dan,40.0"], mtime=NOW - 50)
    write_csv(landing / "d.csv", HEADER, ["5,eve,50.0"], mtime=NOW - 10)
    states = run_and_publish(spark, spec(tmp_path, _props(tmp_path), execution_id=2), watermarks)

    assert states[0]["records_extracted"] == 2
    assert sorted(r.id for r in read(spark, lake).collect()) == [1, 2, 3, 4, 5]
    assert watermarks["orders"].endswith(":d.csv")

    # Nothing new: an empty work unit, the watermark is carried forward, no Spark job, nothing re-read.
    states = run_and_publish(spark, spec(tmp_path, _props(tmp_path), execution_id=3), watermarks)
    assert states[0]["work_unit"]["empty"] is True
    assert states[0]["records_extracted"] == 0
    assert watermarks["orders"].endswith(":d.csv")
    assert read(spark, lake).count() == 5


def test_dataset_skipped_in_a_run_resumes_from_its_own_watermark(spark: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "landing"
    write_csv(root / "orders" / "o1.csv", HEADER, ["1,a,1.0"], mtime=NOW - 300)
    write_csv(root / "users" / "u1.csv", HEADER, ["100,u,0.0"], mtime=NOW - 300)
    watermarks: dict[str, str] = {}
    run_and_publish(spark, spec(tmp_path, _props(tmp_path), execution_id=1), watermarks)
    users_mark = watermarks["users"]

    write_csv(root / "orders" / "o2.csv", HEADER, ["2,b,2.0"], mtime=NOW - 200)
    write_csv(root / "users" / "u2.csv", HEADER, ["101,v,0.0"], mtime=NOW - 200)
    states = run_and_publish(
        spark,
        spec(tmp_path, _props(tmp_path, **{"source.files.datasets": "orders"}), execution_id=2),
        watermarks,
    )
    assert {s["dataset_urn"] for s in states} == {"orders"}
    assert watermarks["users"] == users_mark  # untouched: per-dataset state by URN

    write_csv(root / "users" / "u3.csv", HEADER, ["102,w,0.0"], mtime=NOW - 100)
    states = run_and_publish(spark, spec(tmp_path, _props(tmp_path), execution_id=3), watermarks)
    by_urn = {s["dataset_urn"]: s for s in states}
    assert by_urn["users"]["records_extracted"] == 2  # u2 (skipped run) and u3
    assert by_urn["orders"]["records_extracted"] == 0
    users = read(spark, tmp_path / "lake" / "users").collect()
    assert sorted(r.id for r in users) == [100, 101, 102]
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "orders").collect()) == [1, 2]


def test_json_lines_and_parquet_inputs_and_partitioned_output(spark: SparkSession, tmp_path: Path) -> None:
    src = tmp_path / "landing" / "events"
    src.mkdir(parents=True)
    (src / "e.jsonl").write_text('{"id": 1, "kind": "a"}\n{"id": 2, "kind": "b"}\n')
    props = _props(
        tmp_path,
        **{
            "source.files.format": "json",
            "source.schema": "id BIGINT, kind STRING",
            "writer.partition.columns": "kind",
        },
    )
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    lake = tmp_path / "lake" / "events"
    assert sorted(p.name for p in lake.iterdir()) == ["kind=a", "kind=b"]

    # Parquet in, Parquet out (the published lake becomes the next job's source).
    props2 = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "lake"),
        "source.files.format": "parquet",
        "data.publisher.final.dir": str(tmp_path / "copy"),
    }
    states = run_and_publish(spark, spec(tmp_path, props2, job_name="copy"), {})
    assert states[0]["records_extracted"] == 2
    rows = read(spark, tmp_path / "copy" / "events").collect()
    assert sorted((r.id, r.kind) for r in rows) == [(1, "a"), (2, "b")]


def test_cli_runs_a_jobspec_file_and_prints_taskstates(tmp_path: Path) -> None:
    write_csv(tmp_path / "landing" / "orders" / "a.csv", HEADER, ["1,a,1.5", "2,b,2.5"], mtime=NOW - 100)
    job = spec(tmp_path, _props(tmp_path))
    path = tmp_path / "jobspec.json"
    path.write_text(json.dumps(job))
    done = subprocess.run(
        [sys.executable, "-m", "portal.pipeline", "run", str(path), "--master", "local[1]"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[4],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    states = json.loads(done.stdout)
    assert states[0]["status"] == "SUCCEEDED"
    assert states[0]["records_extracted"] == 2
    plan = plan_commit(job, states)
    renames = [s for s in plan["orders"] if s["type"] == "fs_rename"]
    assert renames and all(Path(s["src"]).exists() for s in renames)
    assert plan["orders"][-1] == {
        "type": "high_watermark",
        "dataset_urn": "orders",
        "value": states[0]["actual_high_watermark"],
    }


def test_run_job_reports_planning_errors_as_a_failed_taskstate(spark: SparkSession, tmp_path: Path) -> None:
    states = run_job(spark, spec(tmp_path, {"source.class": "no.such.Source"}))
    assert len(states) == 1
    assert states[0]["status"] == "FAILED"
    assert "source.class" in states[0]["error"] and "no.such" in states[0]["error"]
