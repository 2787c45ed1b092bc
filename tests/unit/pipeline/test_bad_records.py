"""Bad records set aside: real CSV, JSON and Parquet files read by the real file source on Spark,
published like the orchestrator does; the error files read back as a user would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.badrows import Limits
from portal.pipeline.errors import ConfigError
from portal.pipeline.properties import Properties
from portal.pipeline.propertyrules import value_problems
from portal.pipeline.sources.files import foreign

from .helpers import NOW, read, run_and_publish, spec, write_csv

HEADER = "id,name,amount"
# Six records: two good, a short one (line 4), a bad double (line 5), then two good.
ROWS = ["1,ann,10.5", "2,bob,20.0", "3,cid", "4,dan,lots", "5,eve,50.0", "6,fay,60.0"]


def _props(tmp_path: Path, fmt: str = "csv", **extra: str) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": fmt,
        "source.schema": "id BIGINT, name STRING, amount DOUBLE",
        "data.publisher.final.dir": str(tmp_path / "lake"),
        **extra,
    }


def _error_rows(folder: Path) -> list[dict]:
    files = sorted((folder / "_errors").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def test_bad_rows_within_the_count_are_published_beside_the_dataset_with_reason_file_and_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = write_csv(tmp_path / "landing" / "orders" / "a.csv", HEADER, ROWS, mtime=NOW - 60)
    watermarks: dict[str, str] = {}
    job = spec(tmp_path, _props(tmp_path, **{"errors.max.count": "2"}), execution_id=7)

    states = run_and_publish(spark, job, watermarks)

    state = states[0]
    assert state["status"] == "SUCCEEDED", state["error"]
    assert state["records_extracted"] == 4
    assert state["records_bad"] == 2
    lake = tmp_path / "lake" / "orders"
    assert sorted(r.id for r in read(spark, lake).collect()) == [1, 2, 5, 6]  # `_errors` is not data
    bad = _error_rows(lake)
    assert [(r["line"], r["record"]) for r in bad] == [(4, "3,cid"), (5, "4,dan,lots")]
    assert bad[0]["reason"] == "2 field(s), expected 3"
    assert bad[1]["reason"] == "column 'amount' (double): 'lots' does not parse"
    assert {r["source_file"] for r in bad} == {str(source)}
    assert {r["execution_id"] for r in bad} == {7}
    assert state["bad_records_files"] == [str(lake / "_errors" / f"7-{state['task_id']}.jsonl")]
    assert watermarks["orders"].endswith(":a.csv")


def test_past_the_count_or_the_fraction_the_task_fails_naming_the_rows_and_publishes_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_csv(tmp_path / "landing" / "orders" / "a.csv", HEADER, ROWS, mtime=NOW - 60)

    by_count = run_job(spark, spec(tmp_path, _props(tmp_path, **{"errors.max.count": "1"})))[0]
    assert by_count["status"] == "FAILED"
    assert "2 bad record(s) in dataset 'orders', more than errors.max.count=1" in by_count["error"]
    assert "a.csv line 4: 2 field(s), expected 3; a.csv line 5: column 'amount'" in by_count["error"]
    assert by_count["branches"][0]["output_files"] == []
    kept = Path(by_count["bad_records_files"][0])
    assert kept.name == "bad_records.jsonl" and len(kept.read_text().splitlines()) == 2

    # 2 of 6 records is 33%: a 25% limit fails, a 50% one sets them aside.
    props = _props(tmp_path, **{"errors.max.fraction": "0.25"})
    by_fraction = run_job(spark, spec(tmp_path, props, execution_id=2))[0]
    assert by_fraction["status"] == "FAILED"
    assert "33.33% of the 6 record(s) read, more than errors.max.fraction=0.25" in by_fraction["error"]
    props = _props(tmp_path, **{"errors.max.fraction": "0.5"})
    assert run_job(spark, spec(tmp_path, props, execution_id=3))[0]["status"] == "SUCCEEDED"


def test_with_no_limit_set_one_bad_json_line_fails_the_task_and_none_passes_as_nulls(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = tmp_path / "landing" / "events"
    folder.mkdir(parents=True)
    (folder / "e.json").write_text('{"id": 1, "name": "a"}\n{"id": 2, "name": \n{"id": 3, "name": "c"}\n')
    props = _props(tmp_path, "json", **{"source.schema": "id BIGINT, name STRING"})

    state = run_job(spark, spec(tmp_path, props))[0]

    assert state["status"] == "FAILED"
    assert "1 bad record(s) in dataset 'events', more than errors.max.count=0" in state["error"]
    assert "e.json line 2: malformed JSON" in state["error"]


def test_a_parquet_file_in_a_csv_folder_is_refused_by_name_not_read_as_text(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = tmp_path / "landing" / "orders"
    write_csv(folder / "a.csv", HEADER, ["1,ann,10.5"], mtime=NOW - 60)
    spark.createDataFrame([(1, "x")], "id bigint, name string").coalesce(1).write.parquet(
        str(tmp_path / "pq")
    )
    parquet = next((tmp_path / "pq").glob("*.parquet"))
    (folder / "export.csv").write_bytes(parquet.read_bytes())

    state = run_job(spark, spec(tmp_path, _props(tmp_path, **{"errors.max.count": "1000"})))[0]

    assert state["status"] == "FAILED"
    assert "'export.csv' is a Parquet file" in state["error"]
    assert state["records_extracted"] == 0 and state["branches"][0]["output_files"] == []


def test_the_format_check_reads_the_first_bytes() -> None:
    assert foreign(b"PAR1\x15\x04", "x.csv", "csv") == "a Parquet file"
    assert foreign(b"\x1f\x8b\x08", "x.csv", "csv") == "a gzip file"
    assert foreign(b"\x1f\x8b\x08", "x.csv.gz", "csv") is None  # Spark decompresses it by its name
    assert foreign(b"id,name\n\x00\x01", "x.csv", "json") == "a binary file (it holds NUL bytes)"
    assert foreign(b"\x00\x00\x01\x02", "x.csv.snappy", "csv") is None  # a codec Hadoop reads by its name
    assert foreign(b"id,name\n1,a\n", "x.parquet", "parquet").startswith("not a Parquet file")
    assert foreign(b"PAR1", "x.parquet", "parquet") is None
    assert foreign(b"", "empty.csv", "csv") is None


def test_limits_are_checked_at_save_and_by_the_worker() -> None:
    assert value_problems({"errors.max.fraction": "1.5"}) == [
        "property 'errors.max.fraction' must be between 0 and 1, got 1.5"
    ]
    assert value_problems({"errors.max.count": "-1"}) == [
        "property 'errors.max.count' must be at least 0, got -1"
    ]
    assert value_problems({"errors.max.count": "3", "errors.max.fraction": "0.1"}) == []
    with pytest.raises(ConfigError, match="between 0 and 1"):
        Limits.of(Properties({"errors.max.fraction": "2"}))
    assert Limits.of(Properties({})).passed(1, 10) == "more than errors.max.count=0"
    assert Limits.of(Properties({"errors.max.fraction": "0.2"})).passed(2, 10) is None


def test_a_flow_that_chose_sparks_own_mode_keeps_it(spark: SparkSession, tmp_path: Path) -> None:
    write_csv(tmp_path / "landing" / "orders" / "a.csv", HEADER, ROWS, mtime=NOW - 60)
    props = _props(tmp_path, **{"source.files.option.mode": "DROPMALFORMED"})

    state = run_job(spark, spec(tmp_path, props))[0]

    assert state["status"] == "SUCCEEDED", state["error"]
    assert state["records_extracted"] == 4 and state["records_bad"] == 0
