"""One-pass fork: branches with nothing of their own but a writer are fed by one read, and give the
same records, files and failure semantics as branches that re-read the extract."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from portal.pipeline import onepass
from portal.pipeline.spark import session

from .helpers import NOW, read, run_and_publish, spec, write_csv, write_jsonl

HEADER = "id,country,name,qty"
ROWS = ["1,NO,ann,1", "2,SE,bob,2", "3,DE,cid,3", "4,NO,dan,4", "5,,eve,5"]


def _routing_fork(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Three branches, one format each; Swedish records go to the first two."""
    write_csv(tmp_path / "landing" / "people" / "p.csv", HEADER, ROWS, mtime=NOW - 60)
    return {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "source.schema": "id INT, country STRING, name STRING, qty INT",
        "fork.operator.class": "portal.pipeline.fork.RouteByFieldForkOperator",
        "fork.branches": "3",
        "fork.route.field": "country",
        "fork.route.values.0": "NO,SE",
        "fork.route.values.1": "SE",
        "fork.route.values.2": "*",
        "writer.output.format.1": "ORC",
        "writer.output.format.2": "JSON",
        **{f"data.publisher.final.dir.{i}": str(tmp_path / f"lake{i}") for i in range(3)},
        **extra,
    }


def _published_ids(spark: SparkSession, tmp_path: Path) -> list[list[int]]:
    return [
        sorted(r.id for r in read(spark, tmp_path / f"lake{i}" / "people", fmt).collect())
        for i, fmt in enumerate(("parquet", "orc", "json"))
    ]


def test_the_session_has_the_one_pass_file_format(spark: SparkSession) -> None:
    """`make test` builds the jar and the shared session loads it; without it every fork re-reads."""
    assert session.jar_path(), "portal/pipeline/jvm/flowport-pipeline.jar is missing: run `make jar`"
    assert onepass.available(spark)


def test_a_routing_fork_writes_every_branch_from_one_read(spark: SparkSession, tmp_path: Path) -> None:
    states = run_and_publish(spark, spec(tmp_path, _routing_fork(tmp_path)), {})

    state = states[0]
    assert state["status"] == "SUCCEEDED", state["error"]
    assert state["fork_feed"] == "one_pass"
    assert _published_ids(spark, tmp_path) == [[1, 2, 4], [2], [3, 5]]
    assert [b["records_written"] for b in state["branches"]] == [3, 1, 2]
    assert state["records_extracted"] == 5
    suffixes = [{Path(f["path"]).suffix for f in b["output_files"]} for b in state["branches"]]
    assert suffixes == [{".parquet"}, {".orc"}, {".json"}]
    assert all(b["bytes_written"] > 0 for b in state["branches"])


def test_csv_and_avro_branches_take_the_one_pass_too(spark: SparkSession, tmp_path: Path) -> None:
    props = _routing_fork(tmp_path, **{"writer.output.format.1": "CSV", "writer.output.format.2": "AVRO"})
    state = run_and_publish(spark, spec(tmp_path, props), {})[0]

    assert state["status"] == "SUCCEEDED", state["error"]
    assert state["fork_feed"] == "one_pass"
    csv = spark.read.option("header", "true").csv(str(tmp_path / "lake1" / "people"))
    assert [r.name for r in csv.collect()] == ["bob"]
    avro = spark.read.format("org.apache.spark.sql.avro.AvroFileFormat").load(
        str(tmp_path / "lake2" / "people")
    )
    assert sorted(r.id for r in avro.collect()) == [3, 5]


def test_turning_one_pass_off_gives_the_same_output(spark: SparkSession, tmp_path: Path) -> None:
    one = tmp_path / "one"
    per = tmp_path / "per"
    one_state = run_and_publish(spark, spec(one, _routing_fork(one)), {})[0]
    per_state = run_and_publish(spark, spec(per, _routing_fork(per, **{"fork.one.pass": "false"})), {})[0]

    assert (one_state["fork_feed"], per_state["fork_feed"]) == ("one_pass", "per_branch")
    assert _published_ids(spark, one) == _published_ids(spark, per)
    written = [[b["records_written"] for b in s["branches"]] for s in (one_state, per_state)]
    assert written[0] == written[1]


def test_a_branch_with_its_own_converter_makes_the_branches_re_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    props = _routing_fork(
        tmp_path, **{"converter.classes.1": "DropFieldsConverter", "converter.drop.fields.1": "name"}
    )
    state = run_and_publish(spark, spec(tmp_path, props), {})[0]

    assert state["status"] == "SUCCEEDED", state["error"]
    assert state["fork_feed"] == "per_branch"
    assert "name" not in read(spark, tmp_path / "lake1" / "people", "orc").columns


def test_when_the_pass_fails_each_branch_reports_its_own_outcome(spark: SparkSession, tmp_path: Path) -> None:
    """A codec the ORC writer does not know fails the one pass; the branches then run one by one, so
    the other two finish, the ORC branch says why it failed, and nothing of the task is published."""
    props = _routing_fork(tmp_path, **{"writer.codec.1": "no-such-codec"})
    state = run_and_publish(spark, spec(tmp_path, props), {})[0]

    assert state["status"] == "FAILED"
    assert state["fork_feed"] == "per_branch"
    assert [b["status"] for b in state["branches"]] == ["SUCCEEDED", "FAILED", "SUCCEEDED"]
    assert "no-such-codec" in state["branches"][1]["error"]
    assert "branch 1 (fork_1) failed" in state["error"]
    assert not any((tmp_path / f"lake{i}").exists() for i in range(3))
    assert not list((tmp_path / "work").rglob("*.parquet"))


def test_a_branch_that_gets_no_record_still_publishes_its_schema(spark: SparkSession, tmp_path: Path) -> None:
    props = _routing_fork(tmp_path, **{"fork.route.values.1": "FI"})  # no Finnish records
    state = run_and_publish(spark, spec(tmp_path, props), {})[0]

    assert state["fork_feed"] == "one_pass"
    assert state["branches"][1]["records_written"] == 0 and state["branches"][1]["output_files"]
    empty = read(spark, tmp_path / "lake1" / "people", "orc")
    assert empty.count() == 0 and empty.columns == ["id", "country", "name", "qty"]


def test_two_branches_publishing_to_one_folder_keep_all_their_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Branches of one format and one final folder: each branch's files have names of their own."""
    props = _routing_fork(tmp_path, **{"fork.branches": "2", "fork.route.values.1": "*"})
    for key in ("fork.route.values.2", "writer.output.format.1", "writer.output.format.2"):
        props.pop(key)
    props.pop("data.publisher.final.dir.2")
    props["data.publisher.final.dir.1"] = props["data.publisher.final.dir.0"]
    state = run_and_publish(spark, spec(tmp_path, props), {})[0]

    assert state["status"] == "SUCCEEDED", state["error"]
    assert state["fork_feed"] == "one_pass"
    assert sorted(r.id for r in read(spark, tmp_path / "lake0" / "people").collect()) == [1, 2, 3, 4, 5]


def test_pre_fork_rejects_never_reach_a_branch(spark: SparkSession, tmp_path: Path) -> None:
    props = _routing_fork(
        tmp_path,
        **{
            "qualitychecker.row.policies": "NotNullPolicy",
            "qualitychecker.row.policy.types": "ERR_FILE",
            "qualitychecker.row.notnull.fields": "country",
        },
    )
    state = run_and_publish(spark, spec(tmp_path, props), {})[0]

    assert state["status"] == "SUCCEEDED", state["error"]
    assert state["fork_feed"] == "one_pass"
    assert state["records_extracted"] == 5 and state["records_rejected"] == 1
    assert [r.id for r in read(spark, state["err_dir"], "json").collect()] == [5]
    assert _published_ids(spark, tmp_path) == [[1, 2, 4], [2], [3]]


def test_a_branch_task_policy_failing_fails_the_task(spark: SparkSession, tmp_path: Path) -> None:
    props = _routing_fork(
        tmp_path,
        **{
            "qualitychecker.task.policies.1": "RowCountPolicy",
            "qualitychecker.task.policy.types.1": "FAILED",
            "qualitychecker.task.rowcount.min.1": "2",
        },
    )
    state = run_and_publish(spark, spec(tmp_path, props), {})[0]

    assert state["fork_feed"] == "one_pass"
    assert [b["status"] for b in state["branches"]] == ["SUCCEEDED", "FAILED", "SUCCEEDED"]
    assert "1 record(s) in branch 1 (fork_1), fewer than the minimum 2" in state["error"]
    assert not any((tmp_path / f"lake{i}").exists() for i in range(3))


def test_a_format_that_cannot_write_the_records_fails_only_its_branch(
    spark: SparkSession, tmp_path: Path
) -> None:
    """CSV cannot hold a nested field: Spark's own check refuses the one pass, and the re-reading
    branches then report which branch could not write and why."""
    write_jsonl(
        tmp_path / "landing" / "users" / "u.jsonl",
        [{"id": 1, "profile": {"city": "Oslo"}}, {"id": 2, "profile": {"city": "Rome"}}],
        mtime=NOW - 60,
    )
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "json",
        "fork.branches": "2",
        "writer.output.format.1": "CSV",
        **{f"data.publisher.final.dir.{i}": str(tmp_path / f"lake{i}") for i in range(2)},
    }
    state = run_and_publish(spark, spec(tmp_path, props), {})[0]

    assert state["fork_feed"] == "per_branch"
    assert [b["status"] for b in state["branches"]] == ["SUCCEEDED", "FAILED"]
    assert "CSV" in state["branches"][1]["error"] and "profile" in state["branches"][1]["error"]
