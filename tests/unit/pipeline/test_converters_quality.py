"""Converters as DataFrame transforms, row/task quality policies, and bad input failing the task."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.destinations.commitplan import plan_commit

from .helpers import NOW, data_files, read, run_and_publish, spec, write_csv, write_jsonl


def _files_props(tmp_path: Path, fmt: str = "csv", **extra: str) -> dict[str, str]:
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": fmt,
        "data.publisher.final.dir": str(tmp_path / "lake"),
    }
    props.update(extra)
    return props


def _people(tmp_path: Path) -> None:
    write_csv(
        tmp_path / "landing" / "people" / "p.csv",
        "id,name,email,amount",
        [
            "1,ann,ann@x.org,10",
            "2,,nobody@x.org,20",
            "3,cid,cid@x.org,500",
            "4,dan,not-an-email,30",
            "5,eve,eve@x.org,40",
        ],
        mtime=NOW - 60,
    )


def test_builtin_converters_flatten_rename_cast_drop_purge_and_stamp(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_jsonl(
        tmp_path / "landing" / "users" / "u.jsonl",
        [
            {"id": "1", "profile": {"name": "ann", "geo": {"city": "Oslo"}}, "ssn": "111", "tmp": 1},
            {"id": "2", "profile": {"name": "bob", "geo": {"city": "Rome"}}, "ssn": "222", "tmp": 2},
        ],
        mtime=NOW - 60,
    )
    props = _files_props(
        tmp_path,
        "json",
        **{
            "converter.classes": "JsonFlattenConverter,RenameFieldsConverter,CastFieldsConverter,"
            "DropFieldsConverter,PurgeFieldsConverter,AddIngestionTimeConverter",
            "converter.rename.fields": "profile_name:name,profile_geo_city:city",
            "converter.cast.fields": "id:bigint",
            "converter.drop.fields": "tmp",
            "converter.purge.fields": "ssn",
            "converter.ingestion.time.field": "ingested_at",
        },
    )
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    out = read(spark, tmp_path / "lake" / "users")
    assert sorted(out.columns) == ["city", "id", "ingested_at", "name", "ssn"]
    assert dict(out.dtypes)["id"] == "bigint"
    rows = sorted(out.collect(), key=lambda r: r.id)
    assert [(r.id, r.name, r.city, r.ssn) for r in rows] == [
        (1, "ann", "Oslo", None),
        (2, "bob", "Rome", None),
    ]
    assert rows[0].ingested_at == rows[1].ingested_at and rows[0].ingested_at is not None


def test_row_policies_err_file_optional_and_counts(spark: SparkSession, tmp_path: Path) -> None:
    _people(tmp_path)
    props = _files_props(
        tmp_path,
        **{
            "source.schema": "id INT, name STRING, email STRING, amount INT",
            "qualitychecker.row.policies": "NotNullPolicy,RangePolicy",
            "qualitychecker.row.policy.types": "ERR_FILE,OPTIONAL",
            "qualitychecker.row.notnull.fields": "name",
            "qualitychecker.row.range.field": "amount",
            "qualitychecker.row.range.max": "100",
        },
    )
    states = run_and_publish(spark, spec(tmp_path, props), {})
    state = states[0]
    assert state["status"] == "SUCCEEDED", state["error"]
    assert state["records_extracted"] == 5
    assert state["records_rejected"] == 2  # pre-fork policies
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "people").collect()) == [1, 4, 5]
    err = read(spark, state["err_dir"], "json").collect()
    assert [(r.id, r._reject_reason) for r in err] == [
        (2, "NotNullPolicy")
    ]  # OPTIONAL rows: dropped, no err file
    reports = {q["policy"]: q for q in state["quality"]}
    assert reports["NotNullPolicy"]["failed_records"] == 1 and reports["RangePolicy"]["failed_records"] == 1


def test_fail_row_policy_fails_the_task_and_publishes_nothing(spark: SparkSession, tmp_path: Path) -> None:
    _people(tmp_path)
    props = _files_props(
        tmp_path,
        **{
            "source.schema": "id INT, name STRING, email STRING, amount INT",
            "qualitychecker.row.policies.0": "RegexPolicy",
            "qualitychecker.row.policy.types.0": "FAIL",
            "qualitychecker.row.regex.field": "email",
            "qualitychecker.row.regex.pattern": "^[^@]+@[^@]+$",
        },
    )
    marks = {"people": "000000000000001:old.csv"}
    job = spec(tmp_path, props, watermarks=marks)
    states = run_job(spark, job)
    assert states[0]["status"] == "FAILED"
    assert "RegexPolicy (FAIL) failed on 1 record(s) in branch 0 (fork_0)" in states[0]["error"]
    assert states[0]["actual_high_watermark"] == marks["people"]
    assert plan_commit(job, states) == {
        "people": [{"type": "high_watermark", "dataset_urn": "people", "value": marks["people"]}]
    }
    assert data_files(tmp_path / "work" / "task-output") == []


def test_task_policies_failed_and_optional(spark: SparkSession, tmp_path: Path) -> None:
    _people(tmp_path)
    base = _files_props(tmp_path, **{"source.schema": "id INT, name STRING, email STRING, amount INT"})
    failed = run_job(
        spark,
        spec(
            tmp_path,
            {
                **base,
                "qualitychecker.task.policies": "RowCountPolicy",
                "qualitychecker.task.policy.types": "FAILED",
                "qualitychecker.task.rowcount.min": "10",
            },
        ),
    )
    assert failed[0]["status"] == "FAILED"
    assert "5 record(s) in pre-fork, fewer than the minimum 10" in failed[0]["error"]
    optional = run_job(
        spark,
        spec(
            tmp_path,
            {
                **base,
                "qualitychecker.task.policies": "RowCountPolicy",
                "qualitychecker.task.policy.types": "OPTIONAL",
                "qualitychecker.task.rowcount.min": "10",
            },
            execution_id=2,
        ),
    )
    assert optional[0]["status"] == "SUCCEEDED"
    assert optional[0]["quality"][0]["passed"] is False


def _parquet_file(spark: SparkSession, rows: list[tuple], ddl: str, dest: Path, mtime: float) -> None:
    tmp = dest.parent / f"_tmp_{dest.stem}"
    spark.createDataFrame(rows, ddl).coalesce(1).write.mode("overwrite").parquet(str(tmp))
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(next(tmp.glob("part-*.parquet"))), dest)
    shutil.rmtree(tmp)
    import os

    os.utime(dest, (mtime, mtime))


def test_incompatible_source_schema_change_fails_with_the_reason(spark: SparkSession, tmp_path: Path) -> None:
    landing = tmp_path / "landing" / "metrics"
    _parquet_file(spark, [(1, 1.5)], "id INT, value DOUBLE", landing / "m1.parquet", NOW - 100)
    props = _files_props(
        tmp_path,
        "parquet",
        **{
            "qualitychecker.task.policies": "SchemaCompatibilityPolicy",
            "qualitychecker.task.policy.types": "FAILED",
        },
    )
    marks: dict[str, str] = {}
    first = run_and_publish(spark, spec(tmp_path, props), marks)
    schemas = {"metrics": first[0]["source_schema"]}
    assert json.loads(schemas["metrics"])["fields"][0]["name"] == "id"

    # Compatible: a new column and a widened type.
    _parquet_file(
        spark, [(2, 2.5, "x")], "id BIGINT, value DOUBLE, note STRING", landing / "m2.parquet", NOW - 50
    )
    second = run_and_publish(spark, spec(tmp_path, props, 2, previous_schemas=schemas), marks)
    assert second[0]["status"] == "SUCCEEDED", second[0]["error"]

    # Incompatible: value became a string and id disappeared.
    _parquet_file(spark, [("n/a",)], "value STRING", landing / "m3.parquet", NOW - 10)
    job = spec(tmp_path, props, 3, previous_schemas=schemas)
    before = dict(marks)
    third = run_and_publish(spark, job, marks)
    assert third[0]["status"] == "FAILED"
    assert "changed incompatibly" in third[0]["error"]
    assert "column 'id' was removed" in third[0]["error"]
    assert "column 'value' changed type from double to string" in third[0]["error"]
    assert marks == before
    assert read(spark, tmp_path / "lake" / "metrics").count() == 2


def test_bad_input_fails_the_task_with_a_specific_message(spark: SparkSession, tmp_path: Path) -> None:
    _people(tmp_path)
    base = _files_props(tmp_path, **{"source.schema": "id INT, name STRING, email STRING, amount INT"})
    cases = {
        "unknown class": (
            {"converter.classes": "portal.pipeline.nope.Nope"},
            "'converter.classes': cannot import module 'portal.pipeline.nope'",
        ),
        "class outside the allowed packages": (
            {"converter.classes": "acme.converters.Nope"},
            "'converter.classes': 'acme.converters.Nope' is outside the packages classes may come from",
        ),
        "unknown writer format": (
            {"writer.output.format": "XML"},
            "unknown value 'XML' in 'writer.output.format.0' or 'writer.output.format' for branch 0",
        ),
        "unknown source format": (
            {"source.files.format": "xlsx"},
            "unknown value 'xlsx' in 'source.files.format' (supported: avro, csv, json, jsonl, orc, parquet)",
        ),
        "missing final dir": (
            {"data.publisher.final.dir": ""},
            "missing required property 'data.publisher.final.dir.0' or 'data.publisher.final.dir' for branch 0",
        ),
        "unknown field": (
            {"converter.classes": "DropFieldsConverter", "converter.drop.fields": "nope"},
            "nope",
        ),
    }
    for execution, (name, (override, message)) in enumerate(cases.items(), start=1):
        job = spec(tmp_path, {**base, **override}, execution_id=execution)
        states = run_job(spark, job)
        assert states[0]["status"] == "FAILED", name
        assert message in states[0]["error"], (name, states[0]["error"])
        assert not any(s["type"] == "fs_rename" for steps in plan_commit(job, states).values() for s in steps)
    assert not (tmp_path / "lake").exists()
