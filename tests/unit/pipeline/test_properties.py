"""The uniform fork key rule, JobSpec round trips, watermark merging and work-unit packing (no Spark)."""

from __future__ import annotations

import pytest

from portal.pipeline import watermarks
from portal.pipeline.errors import ConfigError, MissingPropertyError
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.properties import Properties, check_branch_keys
from portal.pipeline.workunits import WorkUnit, pack


def test_single_branch_reads_dot_zero_then_the_bare_key() -> None:
    props = Properties(
        {"writer.output.format": "ORC", "writer.codec.0": "zstd", "source.files.format": "csv"}
    )
    branch = props.for_branch(0, 1, "fork_0")
    assert branch.get("writer.output.format") == "ORC"
    assert branch.get("writer.codec") == "zstd"
    assert branch.get("source.files.format") == "csv"  # not branch-scoped: never suffixed


def test_class_lists_never_fall_back_so_the_pre_fork_list_is_not_run_twice() -> None:
    props = Properties({"converter.classes": "A", "converter.classes.0": "B"})
    assert props.pre_fork().get_list("converter.classes") == ["A"]
    assert props.for_branch(0, 1, "fork_0").get_list("converter.classes") == ["B"]
    assert Properties({"converter.classes": "A"}).for_branch(0, 1, "f").get_list("converter.classes") == []


def test_multi_branch_reads_only_suffixed_keys_and_errors_name_key_and_branch() -> None:
    props = Properties({"data.publisher.final.dir.0": "/a", "converter.x": "pre"})
    assert props.for_branch(0, 2, "a").get("data.publisher.final.dir") == "/a"
    assert props.for_branch(1, 2, "b").get("converter.x") is None
    with pytest.raises(MissingPropertyError, match=r"'data.publisher.final.dir.1' for branch 1 \(b\)"):
        props.for_branch(1, 2, "b").require("data.publisher.final.dir")


def test_check_branch_keys_rejects_ambiguous_and_out_of_range_keys() -> None:
    check_branch_keys({"writer.output.format": "ORC"}, 1)
    check_branch_keys({"converter.classes": "A", "writer.output.format.1": "ORC"}, 2)
    with pytest.raises(ConfigError, match=r"'writer\.output\.format' has no branch suffix"):
        check_branch_keys({"writer.output.format": "ORC"}, 2)
    with pytest.raises(ConfigError, match=r"'writer.output.format.2' is for branch 2 but there are 2"):
        check_branch_keys({"writer.output.format.2": "ORC"}, 2)


def test_typed_getters_explain_bad_values() -> None:
    props = Properties({"fork.branches": "two", "extract.is.full": "maybe"})
    with pytest.raises(ConfigError, match=r"'fork\.branches' must be an integer"):
        props.get_int("fork.branches")
    with pytest.raises(ConfigError, match="must be true or false"):
        props.get_bool("extract.is.full")


def test_jobspec_round_trip_keeps_unknown_fields_and_validates() -> None:
    data = {"job_name": "j", "execution_id": "5", "properties": {"a": 1}, "work_dir": "/w", "trace_id": "x"}
    spec = JobSpec.from_dict(data)
    assert spec.execution_id == 5 and spec.properties == {"a": "1"}
    again = JobSpec.from_dict(spec.to_dict())
    assert again == spec and again.to_dict()["trace_id"] == "x"
    with pytest.raises(ConfigError, match="job_name"):
        JobSpec.from_dict({"execution_id": 1})


def test_lookback_watermarks_merge_values_and_seen_sets() -> None:
    first = watermarks.make("10", [1, 2])
    second = watermarks.make("20", [3])
    merged = watermarks.merge([first, second])
    assert watermarks.value_of(merged) == "20"
    assert watermarks.seen_of(merged) == [1, 2, 3]
    assert watermarks.merge(["5", "7"]) == "7"
    assert watermarks.value_of("000001:a.csv") == "000001:a.csv"


def test_pack_balances_by_estimated_size_and_keeps_range_order() -> None:
    units = [WorkUnit("big", None, "1", estimated_bytes=100)]
    units += [WorkUnit("small", str(i), str(i + 1), i, 5, estimated_bytes=20) for i in range(5)]
    groups = pack(units, 2)
    assert sorted(g.estimated_bytes for g in groups) == [100, 100]
    small = next(g for g in groups if g.work_units[0].dataset_urn == "small")
    assert [w.range_index for w in small.work_units] == [0, 1, 2, 3, 4]
    assert len(pack(units, 10)) == 6
