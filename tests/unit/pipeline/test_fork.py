"""ForkOperator: per-branch converters/checkers/formats, routing, Gobblin's sensitive-data example,
branch-count mismatch, and branch failure semantics under each commit policy."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, SparkSession
from pyspark.sql import types as T

from portal.pipeline import run_job
from portal.pipeline.destinations.commitplan import plan_commit
from portal.pipeline.fork import ForkOperator

from .helpers import NOW, data_files, read, run_and_publish, spec, write_csv

HEADER = "id,country,name,ssn,qty"
ROWS = ["1,NO,ann,,1", "2,SE,bob,123,2", "3,DE,cid,,3", "4,NO,dan,456,4"]


class TwoOfThreeForkOperator(ForkOperator):
    """A broken operator: claims 3 branches but decides for 2."""

    def get_branches(self) -> int:
        return 3

    def fork_data_records(self, schema: T.StructType) -> list[Column | bool]:
        return [True, True]


def _props(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "source.schema": "id INT, country STRING, name STRING, ssn STRING, qty STRING",
        **extra,
    }


def _landing(tmp_path: Path) -> None:
    write_csv(tmp_path / "landing" / "people" / "p.csv", HEADER, ROWS, mtime=NOW - 60)


def test_three_branches_with_their_own_converters_checkers_and_formats(
    spark: SparkSession, tmp_path: Path
) -> None:
    _landing(tmp_path)
    lake = tmp_path / "lake"
    props = _props(
        tmp_path,
        **{
            "fork.branches": "3",
            "fork.branch.name.0": "parquet_copy",
            "fork.branch.name.1": "orc_clean",
            "fork.branch.name.2": "csv_export",
            # pre-fork: cast qty for everyone
            "converter.classes": "CastFieldsConverter",
            "converter.cast.fields": "qty:int",
            # branch 0: drop ssn, Parquet
            "converter.classes.0": "DropFieldsConverter",
            "converter.drop.fields.0": "ssn",
            "data.publisher.final.dir.0": str(lake / "b0"),
            # branch 1: only rows with an ssn pass (the others to the err file), ORC
            "qualitychecker.row.policies.1": "NotNullPolicy",
            "qualitychecker.row.policy.types.1": "ERR_FILE",
            "qualitychecker.row.notnull.fields.1": "ssn",
            "writer.output.format.1": "ORC",
            "data.publisher.final.dir.1": str(lake / "b1"),
            # branch 2: rename, CSV
            "converter.classes.2": "RenameFieldsConverter",
            "converter.rename.fields.2": "name:full_name",
            "writer.output.format.2": "CSV",
            "data.publisher.final.dir.2": str(lake / "b2"),
        },
    )
    states = run_and_publish(spark, spec(tmp_path, props), {})
    state = states[0]
    assert state["status"] == "SUCCEEDED", state["error"]
    branches = {b["name"]: b for b in state["branches"]}
    assert [b["format"] for b in state["branches"]] == ["PARQUET", "ORC", "CSV"]
    assert branches["parquet_copy"]["records_written"] == 4
    assert branches["orc_clean"]["records_written"] == 2 and branches["orc_clean"]["records_err_file"] == 2
    b0 = read(spark, lake / "b0" / "people")
    assert "ssn" not in b0.columns and dict(b0.dtypes)["qty"] == "int"
    assert sorted(r.id for r in read(spark, lake / "b1" / "people", "orc").collect()) == [2, 4]
    b2 = read(spark, lake / "b2" / "people", "csv")
    assert "full_name" in b2.columns and b2.count() == 4
    err = read(spark, branches["orc_clean"]["err_dir"], "json").collect()
    assert sorted(r.id for r in err) == [1, 3]


def test_branches_sharing_a_folder_are_told_apart_and_a_next_hop_reads_one(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A fork into a files node publishes every branch to the flow's one folder (as the portal binds
    it); each file names its branch, so the next hop copies branch 0 alone."""
    _landing(tmp_path)
    lake = str(tmp_path / "lake")
    props = _props(
        tmp_path,
        **{
            "fork.operator.class": "portal.pipeline.fork.RouteByFieldForkOperator",
            "fork.branches": "2",
            "fork.route.field": "country",
            "fork.route.values.0": "NO",
            "fork.route.values.1": "*",
            "fork.one.pass": "false",  # the re-read path names its files too
            "data.publisher.final.dir.0": lake,
            "data.publisher.final.dir.1": lake,
        },
    )
    assert run_and_publish(spark, spec(tmp_path, props), {})[0]["status"] == "SUCCEEDED"
    names = [p.name for p in data_files(tmp_path / "lake" / "people")]
    assert names and all("-b0." in n or "-b1." in n for n in names), names

    copy = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": lake,
        "source.files.format": "parquet",
        "source.files.glob": "*-b0.*",
        "data.publisher.final.dir": str(tmp_path / "archive"),
    }
    assert run_and_publish(spark, spec(tmp_path, copy, job_name="copy"), {})[0]["status"] == "SUCCEEDED"
    assert sorted(r.id for r in read(spark, tmp_path / "archive" / "people").collect()) == [1, 4]


def test_route_by_field_sends_each_record_to_its_branch(spark: SparkSession, tmp_path: Path) -> None:
    _landing(tmp_path)
    props = _props(
        tmp_path,
        **{
            "fork.operator.class": "portal.pipeline.fork.RouteByFieldForkOperator",
            "fork.branches": "2",
            "fork.route.field": "country",
            "fork.route.values.0": "NO,SE",
            "fork.route.values.1": "*",
            "data.publisher.final.dir.0": str(tmp_path / "nordic"),
            "data.publisher.final.dir.1": str(tmp_path / "other"),
            "writer.output.format.1": "JSON",
        },
    )
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    assert sorted(r.id for r in read(spark, tmp_path / "nordic" / "people").collect()) == [1, 2, 4]
    assert [r.id for r in read(spark, tmp_path / "other" / "people", "json").collect()] == [3]


def test_gobblins_sensitive_data_example(spark: SparkSession, tmp_path: Path) -> None:
    """Gobblin's fork example job: records with sensitive data are purged and go to branch 0."""
    _landing(tmp_path)
    out = tmp_path / "job-output"
    props = _props(
        tmp_path,
        **{
            "fork.operator.class": "portal.pipeline.examples.SensitiveDataAwareForkOperator",
            "fork.sensitive.fields": "ssn",
            "qualitychecker.task.policies": "RowCountPolicy",
            "qualitychecker.task.policy.types": "OPTIONAL",
            "converter.classes.0": "PurgeFieldsConverter",
            "converter.purge.fields.0": "ssn",
            "qualitychecker.row.policies.0": "NotNullPolicy",
            "qualitychecker.row.policy.types.0": "FAIL",
            "qualitychecker.row.notnull.fields.0": "id,name",
            "writer.output.format.0": "PARQUET",
            "writer.staging.dir.0": str(tmp_path / "task-staging" / "purged"),
            "writer.output.dir.0": str(tmp_path / "task-output" / "purged"),
            "data.publisher.final.dir.0": str(out / "purged"),
            "writer.output.format.1": "PARQUET",
            "writer.staging.dir.1": str(tmp_path / "task-staging" / "normal"),
            "writer.output.dir.1": str(tmp_path / "task-output" / "normal"),
            "data.publisher.final.dir.1": str(out / "normal"),
        },
    )
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    purged = read(spark, out / "purged" / "people").collect()
    assert sorted((r.id, r.ssn) for r in purged) == [(2, None), (4, None)]
    assert sorted(r.id for r in read(spark, out / "normal" / "people").collect()) == [1, 3]


def test_branch_count_mismatch_fails_the_task(spark: SparkSession, tmp_path: Path) -> None:
    _landing(tmp_path)
    props = _props(
        tmp_path,
        **{
            "fork.operator.class": f"{__name__}.TwoOfThreeForkOperator",
            **{f"data.publisher.final.dir.{i}": str(tmp_path / f"o{i}") for i in range(3)},
        },
    )
    states = run_job(spark, spec(tmp_path, props))
    assert states[0]["status"] == "FAILED"
    assert (
        "fork branch mismatch: TwoOfThreeForkOperator.fork_data_records returned 2 value(s)"
        in states[0]["error"]
    )
    assert "get_branches() is 3" in states[0]["error"]


def test_multi_branch_keys_must_carry_their_branch_index(spark: SparkSession, tmp_path: Path) -> None:
    _landing(tmp_path)
    missing = _props(tmp_path, **{"fork.branches": "2", "data.publisher.final.dir.0": str(tmp_path / "o0")})
    states = run_job(spark, spec(tmp_path, missing))
    assert (
        "missing required property 'data.publisher.final.dir.1' for branch 1 (fork_1)" in states[0]["error"]
    )
    bare = _props(tmp_path, **{"fork.branches": "2", "writer.output.format": "ORC"})
    states = run_job(spark, spec(tmp_path, bare, execution_id=2))
    assert "'writer.output.format' has no branch suffix but fork.branches=2" in states[0]["error"]


def _two_datasets_one_bad_branch(tmp_path: Path, policy: str) -> dict[str, str]:
    landing = tmp_path / "landing"
    write_csv(landing / "a" / "a1.csv", HEADER, ["1,NO,ann,,1"], mtime=NOW - 90)
    write_csv(landing / "a" / "a2.csv", HEADER, ["2,NO,bob,,oops"], mtime=NOW - 80)  # breaks branch 1 only
    write_csv(landing / "b" / "b1.csv", HEADER, ["3,SE,cid,,3"], mtime=NOW - 70)
    return _props(
        tmp_path,
        **{
            "fork.branches": "2",
            "source.files.workunit.max.files": "1",
            "converter.classes.1": "CastFieldsConverter",
            "converter.cast.fields.1": "qty:int",
            "data.publisher.final.dir.0": str(tmp_path / "lake0"),
            "data.publisher.final.dir.1": str(tmp_path / "lake1"),
            "job.commit.policy": policy,
        },
    )


def _published(spark: SparkSession, root: Path) -> list[int]:
    return sorted(r.id for r in read(spark, root).collect()) if root.exists() else []


def test_branch_failure_under_each_commit_policy(spark: SparkSession, tmp_path: Path) -> None:
    outcomes = {}
    for policy in ("full", "partial", "successful"):
        base = tmp_path / policy
        marks: dict[str, str] = {}
        states = run_and_publish(spark, spec(base, _two_datasets_one_bad_branch(base, policy)), marks)
        failed = [s for s in states if s["status"] == "FAILED"]
        assert len(failed) == 1 and failed[0]["dataset_urn"] == "a"
        # The failing branch did not stop the other one.
        assert [b["status"] for b in failed[0]["branches"]] == ["SUCCEEDED", "FAILED"]
        assert "branch 1 (fork_1) failed" in failed[0]["error"]
        outcomes[policy] = (
            _published(spark, base / "lake0" / "a"),
            _published(spark, base / "lake1" / "a"),
            _published(spark, base / "lake0" / "b"),
            marks.get("a", "").split(":")[-1],
            marks.get("b", "").split(":")[-1],
        )
    assert outcomes["full"] == ([], [], [], "", "")
    assert outcomes["partial"] == ([], [], [3], "", "b1.csv")
    assert outcomes["successful"] == ([1], [1], [3], "a1.csv", "b1.csv")


def test_multi_work_units_pack_small_units_and_report_it(spark: SparkSession, tmp_path: Path) -> None:
    for i in range(6):
        write_csv(
            tmp_path / "landing" / f"d{i}" / "f.csv", HEADER, [f"{i},NO,x,,1"] * (1 + i * 20), mtime=NOW - 60
        )
    props = _props(
        tmp_path, **{"mr.job.max.mappers": "2", "data.publisher.final.dir": str(tmp_path / "lake")}
    )
    job = spec(tmp_path, props)
    states = run_job(spark, job)
    assert all(s["status"] == "SUCCEEDED" for s in states)
    groups: dict[str, list[dict]] = {}
    for s in states:
        groups.setdefault(s["multi_work_unit"]["id"], []).append(s)
    assert len(groups) == 2 and all(s["multi_work_unit"]["groups"] == 2 for s in states)
    loads = sorted(g[0]["multi_work_unit"]["estimated_bytes"] for g in groups.values())
    assert loads[1] - loads[0] <= max(s["work_unit"]["estimated_bytes"] for s in states)
    assert sum(len(g) for g in groups.values()) == 6
    assert len(plan_commit(job, states)) == 6
