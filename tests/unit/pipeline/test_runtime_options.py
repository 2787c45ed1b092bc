"""Runtime options: a custom Source (the docs' example), Hadoop URIs, writer sizing/partitioning,
cancellation."""

from __future__ import annotations

import threading
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from portal.pipeline import run_job
from portal.pipeline.sources.base import Extraction, Source
from portal.pipeline.workunits import WorkUnit

from .helpers import NOW, data_files, read, run_and_publish, spec, write_csv


class NumbersSource(Source):
    """The custom Source of docs/pipeline.md, verbatim."""

    def get_work_units(self) -> list[WorkUnit]:
        low = self.previous_watermark("numbers")
        start = int(low or 0)
        high = start + (self.props.get_int("numbers.per.run", 100) or 100)
        return [WorkUnit("numbers", low, str(high), estimated_bytes=8 * (high - start))]

    def extract(self, wu: WorkUnit) -> Extraction:
        start = int(wu.low_watermark or 0)
        return Extraction(self.spark.range(start + 1, int(wu.expected_high_watermark) + 1))


class CronSource(NumbersSource):
    """Derives a column with a Python UDF that imports a package only the virtualenv has."""

    def extract(self, wu: WorkUnit) -> Extraction:
        def next_minute(n: int) -> str:
            from datetime import datetime

            from croniter import croniter

            return croniter("* * * * *", datetime(2026, 1, 1, 0, n)).get_next(datetime).isoformat()

        df = super().extract(wu).df
        return Extraction(df.withColumn("next", F.udf(next_minute, "string", useArrow=False)("id")))


def test_a_python_udf_in_a_custom_source_imports_the_virtualenvs_packages(
    spark: SparkSession, tmp_path: Path
) -> None:
    props = {
        "source.class": f"{__name__}.CronSource",
        "numbers.per.run": "2",
        "data.publisher.final.dir": str(tmp_path / "lake"),
    }
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    rows = read(spark, tmp_path / "lake" / "numbers").orderBy("id").collect()
    assert [r.next for r in rows] == ["2026-01-01T00:02:00", "2026-01-01T00:03:00"]


def test_custom_source_by_dotted_path_runs_incrementally(spark: SparkSession, tmp_path: Path) -> None:
    props = {
        "source.class": f"{__name__}.NumbersSource",
        "numbers.per.run": "5",
        "data.publisher.final.dir": str(tmp_path / "lake"),
    }
    marks: dict[str, str] = {}
    run_and_publish(spark, spec(tmp_path, props), marks)
    run_and_publish(spark, spec(tmp_path, props, execution_id=2), marks)
    assert marks == {"numbers": "10"}
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "numbers").collect()) == list(range(1, 11))


def test_hadoop_uris_for_source_work_dir_and_publish(spark: SparkSession, tmp_path: Path) -> None:
    write_csv(tmp_path / "landing" / "t" / "a.csv", "id", ["1", "2"], mtime=NOW - 60)
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": f"file://{tmp_path}/landing",
        "source.files.format": "csv",
        "source.schema": "id INT",
        "data.publisher.final.dir": f"file://{tmp_path}/lake",
    }
    job = spec(tmp_path, props)
    job["work_dir"] = f"file://{tmp_path}/work"
    marks: dict[str, str] = {}
    states = run_and_publish(spark, job, marks)
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    assert states[0]["branches"][0]["output_files"][0]["path"].startswith("file:")
    assert marks["t"].endswith(":a.csv")
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "t").collect()) == [1, 2]
    assert data_files(tmp_path / "work") == []  # task output moved, folders cleaned up


def test_writer_partitions_by_ingestion_date_and_caps_records_per_file(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_csv(tmp_path / "landing" / "t" / "a.csv", "id", [str(i) for i in range(10)], mtime=NOW - 60)
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "source.schema": "id INT",
        "writer.partition.columns": "ingestion_date",
        "writer.file.max.records": "3",
        "writer.output.format": "JSON",
        "data.publisher.final.dir": str(tmp_path / "lake"),
    }
    states = run_and_publish(spark, spec(tmp_path, props), {})
    branch = states[0]["branches"][0]
    assert branch["records_written"] == 10
    assert len(branch["output_files"]) >= 4 and branch["bytes_written"] > 0
    folders = [p.name for p in (tmp_path / "lake" / "t").iterdir()]
    assert len(folders) == 1 and folders[0].startswith("ingestion_date=")
    assert read(spark, tmp_path / "lake" / "t", "json").count() == 10


def test_a_cancelled_job_reports_cancelled_tasks_and_keeps_watermarks(
    spark: SparkSession, tmp_path: Path
) -> None:
    for name in ("a", "b"):
        write_csv(tmp_path / "landing" / name / "f.csv", "id", ["1"], mtime=NOW - 60)
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "data.publisher.final.dir": str(tmp_path / "lake"),
    }
    cancel = threading.Event()
    cancel.set()
    seen: list[str] = []
    states = run_job(
        spark, spec(tmp_path, props), cancel_event=cancel, on_task_state=lambda s: seen.append(s["task_id"])
    )
    assert [s["status"] for s in states] == ["CANCELLED", "CANCELLED"]
    assert all(s["actual_high_watermark"] is None for s in states)
    assert sorted(seen) == sorted(s["task_id"] for s in states)


def test_avro_writer_and_source_work_offline_with_pysparks_own_jars(
    spark: SparkSession, tmp_path: Path
) -> None:
    from portal.pipeline.destinations.files import AVRO_FILE_FORMAT, avro_available

    assert avro_available(spark)
    write_csv(
        tmp_path / "landing" / "people" / "a.csv",
        "id,name,seen",
        ["1,ann,2024-05-01 10:00:00", "2,bob,2024-05-02 11:30:00"],
        mtime=NOW - 60,
    )
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "source.schema": "id INT, name STRING, seen TIMESTAMP",
        "writer.output.format": "avro",
        "writer.codec": "deflate",
        "data.publisher.final.dir": str(tmp_path / "lake"),
    }
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    assert states[0]["branches"][0]["format"] == "AVRO"
    files = data_files(tmp_path / "lake" / "people")
    assert files and all(f.name.endswith(".avro") for f in files)
    header = files[0].read_bytes()[:600]
    assert header.startswith(b"Obj\x01")  # an Avro object container file
    assert b"avro.schema" in header and b"deflate" in header and b'"name":"seen"' in header
    back = spark.read.format(AVRO_FILE_FORMAT).load(str(tmp_path / "lake" / "people"))
    assert sorted((r.id, r.name, str(r.seen)) for r in back.collect()) == [
        (1, "ann", "2024-05-01 10:00:00"),
        (2, "bob", "2024-05-02 11:30:00"),
    ]

    # The files source reads Avro too: the published folder becomes the next job's landing zone.
    again = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "lake"),
        "source.files.format": "avro",
        "data.publisher.final.dir": str(tmp_path / "copy"),
    }
    states = run_and_publish(spark, spec(tmp_path / "second", again), {})
    assert states[0]["records_extracted"] == 2, states[0]["error"]
    assert sorted(r.name for r in read(spark, tmp_path / "copy" / "people").collect()) == ["ann", "bob"]
