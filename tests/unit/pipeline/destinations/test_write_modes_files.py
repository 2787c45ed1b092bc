"""Write modes of a files destination: a dataset folder overwritten, merged or given history by one
exchange of folders, a backfill of a partitioned dataset replacing the partitions it reads again,
and every crash point of the publish finished exactly once by running the steps again."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.destinations.commit_steps import CommitSequence, CommitStep
from portal.pipeline.destinations.files_replace import MARKER, _sibling
from portal.pipeline.errors import CommitConflictError
from tests.unit.pipeline.helpers import NOW, data_files, publish, read, run_and_publish, spec, write_csv


def _props(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "source.schema": "id INT, name STRING, day INT",
        "data.publisher.final.dir": str(tmp_path / "lake"),
        **extra,
    }


def _names(spark: SparkSession, path: Path, fmt: str = "parquet") -> list[tuple[int, str]]:
    return sorted((r.id, r.name) for r in read(spark, path, fmt).collect())


def test_overwrite_replaces_the_dataset_folder_whole(spark: SparkSession, tmp_path: Path) -> None:
    landing = tmp_path / "landing" / "orders"
    write_csv(landing / "a.csv", "id,name,day", ["1,ann,1", "2,bob,1", "3,cid,2"], mtime=NOW - 120)
    props = _props(tmp_path, **{"writer.write.mode": "overwrite"})
    marks: dict[str, str] = {}
    run_and_publish(spark, spec(tmp_path, props), marks)
    write_csv(landing / "b.csv", "id,name,day", ["4,dan,3"], mtime=NOW - 60)
    job = spec(tmp_path, props, execution_id=2, watermarks=marks)
    states = run_job(spark, job)
    plan = publish(job, states, marks)
    assert [s["type"] for s in plan["orders"]] == ["fs_replace", "high_watermark"]
    assert _names(spark, tmp_path / "lake" / "orders") == [(4, "dan")]
    assert (tmp_path / "lake" / "orders" / MARKER).read_text() == "job:2:orders"
    assert [p.name for p in (tmp_path / "lake").iterdir()] == ["orders"]  # nothing left beside it
    assert CommitSequence.from_dicts(plan["orders"][:-1]).run() == 0


def test_merge_rewrites_a_csv_dataset_with_the_latest_row_per_key(
    spark: SparkSession, tmp_path: Path
) -> None:
    landing = tmp_path / "landing" / "orders"
    write_csv(landing / "a.csv", "id,name,day", ["1,ann,1", "2,bob,1"], mtime=NOW - 120)
    props = _props(
        tmp_path,
        **{"writer.output.format": "CSV", "writer.write.mode": "merge", "extract.primary.key.fields": "id"},
    )
    marks: dict[str, str] = {}
    run_and_publish(spark, spec(tmp_path, props), marks)
    write_csv(landing / "b.csv", "id,name,day", ["2,bobby,2", "3,cid,2"], mtime=NOW - 60)
    run_and_publish(spark, spec(tmp_path, props, execution_id=2), marks)
    assert _names(spark, tmp_path / "lake" / "orders", "csv") == [(1, "ann"), (2, "bobby"), (3, "cid")]
    assert len(data_files(tmp_path / "lake" / "orders")) == 1


def test_a_backfill_of_a_partitioned_dataset_replaces_the_partitions_it_reads(
    spark: SparkSession, tmp_path: Path
) -> None:
    t = int(NOW) - 1000
    landing = tmp_path / "landing" / "orders"
    write_csv(landing / "a.csv", "id,name,day", ["1,ann,1", "2,bob,1"], mtime=t)
    write_csv(landing / "b.csv", "id,name,day", ["3,cid,2"], mtime=t + 100)
    props = _props(tmp_path, **{"writer.partition.columns": "day"})
    marks: dict[str, str] = {}
    run_and_publish(spark, spec(tmp_path, props), marks)
    write_csv(landing / "a.csv", "id,name,day", ["1,ann,1", "2,bobby,1"], mtime=t)  # corrected at the source
    job = spec(
        tmp_path,
        props,
        execution_id=2,
        watermarks=marks,
        backfill={"orders": {"low": None, "high": f"{t * 1000:015d}"}},
    )
    states = run_job(spark, job)
    plan = publish(job, states, marks)
    assert [s["type"] for s in plan["orders"]] == ["fs_replace"]
    # Appended, day=1 would hold ann and bob twice; replaced, it holds the backfill's rows once.
    assert _names(spark, tmp_path / "lake" / "orders") == [(1, "ann"), (2, "bobby"), (3, "cid")]


# -- the step alone: history and every crash point --------------------------------------------------


def _parquet(path: Path, rows: list[dict[str, Any]]) -> dict[str, Any]:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return {"src": str(path), "relative": path.name, "size": path.stat().st_size}


def _step(tmp_path: Path, execution: int, mode: str, files: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "fs_replace",
        "dataset_urn": "customers",
        "branch": 0,
        "final": str(tmp_path / "lake" / "customers"),
        "mode": mode,
        "format": "PARQUET",
        "files": files,
        "token": f"job:{execution}:customers",
        "partitions": False,
        "merge_keys": ["id"],
        "merge_order": None,
        "delete_column": "deleted",
    }


def _rows(tmp_path: Path) -> list[dict[str, Any]]:
    table = pq.read_table(tmp_path / "lake" / "customers")  # as any reader: '_' and '.' names skipped
    return sorted(table.to_pylist(), key=lambda r: (r["id"], r.get("valid_from") or 0))


def test_history_keeps_every_version_of_a_files_dataset(tmp_path: Path) -> None:
    first = [{"id": 1, "name": "ann", "deleted": False}, {"id": 2, "name": "bob", "deleted": False}]
    CommitSequence.from_dicts(
        [_step(tmp_path, 1, "history", [_parquet(tmp_path / "t1" / "a.parquet", first)])]
    ).run()
    second = [
        {"id": 1, "name": "ann", "deleted": False},
        {"id": 2, "name": "bobby", "deleted": False},
        {"id": 3, "name": "cid", "deleted": False},
    ]
    step = _step(tmp_path, 2, "history", [_parquet(tmp_path / "t2" / "a.parquet", second)])
    assert CommitSequence.from_dicts([step]).run() == 1
    assert CommitSequence.from_dicts([step]).run() == 0  # replayed: no second version
    rows = [(r["id"], r["name"], r["is_current"], r["valid_to"] is None) for r in _rows(tmp_path)]
    assert rows == [
        (1, "ann", True, True),
        (2, "bob", False, False),
        (2, "bobby", True, True),
        (3, "cid", True, True),
    ]
    closed = next(r for r in _rows(tmp_path) if r["name"] == "bob")
    assert closed["valid_to"] > closed["valid_from"] and closed["valid_to"] <= dt.datetime.now(dt.UTC)


def test_merge_deletes_keys_marked_deleted(tmp_path: Path) -> None:
    first = [{"id": 1, "name": "ann", "deleted": False}, {"id": 2, "name": "bob", "deleted": False}]
    CommitSequence.from_dicts(
        [_step(tmp_path, 1, "merge", [_parquet(tmp_path / "t1" / "a.parquet", first)])]
    ).run()
    second = [{"id": 2, "name": "bob", "deleted": True}, {"id": 3, "name": "cid", "deleted": False}]
    CommitSequence.from_dicts(
        [_step(tmp_path, 2, "merge", [_parquet(tmp_path / "t2" / "a.parquet", second)])]
    ).run()
    assert [(r["id"], r["name"]) for r in _rows(tmp_path)] == [(1, "ann"), (3, "cid")]


def _published(tmp_path: Path, ids: list[int]) -> None:
    """The dataset as an earlier overwrite left it."""
    files = [
        _parquet(tmp_path / "t0" / f"p{i}.parquet", [{"id": i, "name": "old", "deleted": False}]) for i in ids
    ]
    CommitSequence.from_dicts([_step(tmp_path, 1, "overwrite", files)]).run()


def test_a_crash_after_part_of_the_moves_is_finished_by_running_again(tmp_path: Path) -> None:
    _published(tmp_path, [1, 2])
    files = [
        _parquet(tmp_path / "t2" / f"n{i}.parquet", [{"id": i, "name": "new", "deleted": False}])
        for i in (7, 8)
    ]
    data = _step(tmp_path, 2, "overwrite", files)
    new = _sibling(data["final"], "new", data["token"])
    Path(new).mkdir()
    Path(files[0]["src"]).rename(Path(new) / "n7.parquet")  # the crash: one file moved, no exchange
    assert _rows(tmp_path)[0]["name"] == "old"  # readers still see the old dataset whole
    assert CommitSequence.from_dicts([data]).run() == 1
    assert [(r["id"], r["name"]) for r in _rows(tmp_path)] == [(7, "new"), (8, "new")]


def test_a_crash_between_the_two_renames_puts_the_old_folder_back_first(tmp_path: Path) -> None:
    _published(tmp_path, [1])
    files = [_parquet(tmp_path / "t2" / "n.parquet", [{"id": 9, "name": "new", "deleted": False}])]
    data = _step(tmp_path, 2, "merge", files)
    old = _sibling(data["final"], "old", data["token"])
    Path(data["final"]).rename(old)  # the fallback's first rename happened, then the crash
    assert CommitSequence.from_dicts([data]).run() == 1
    assert [(r["id"], r["name"]) for r in _rows(tmp_path)] == [
        (1, "old"),
        (9, "new"),
    ]  # merged with the old rows
    assert not Path(old).exists()


def test_a_crash_after_the_exchange_is_tidied_by_verify(tmp_path: Path) -> None:
    _published(tmp_path, [1])
    files = [_parquet(tmp_path / "t2" / "n.parquet", [{"id": 9, "name": "new", "deleted": False}])]
    data = _step(tmp_path, 2, "overwrite", files)
    step = CommitStep.from_dict(data)
    new = _sibling(data["final"], "new", data["token"])
    step._move(data["files"], new)  # type: ignore[attr-defined]
    (Path(new) / MARKER).write_text(data["token"])
    step._swap(new, data["final"], _sibling(data["final"], "old", data["token"]))  # type: ignore[attr-defined]
    Path(new).mkdir()  # the crash: as if the old content were still beside the dataset
    assert step.verify() is True and not Path(new).exists()
    assert CommitSequence.from_dicts([data]).run() == 0
    assert [(r["id"], r["name"]) for r in _rows(tmp_path)] == [(9, "new")]


def test_lost_task_output_is_a_conflict_not_an_empty_dataset(tmp_path: Path) -> None:
    _published(tmp_path, [1])
    data = _step(
        tmp_path, 2, "overwrite", [{"src": str(tmp_path / "gone.parquet"), "relative": "gone.parquet"}]
    )
    with pytest.raises(CommitConflictError, match=r"gone\.parquet: it does not exist"):
        CommitSequence.from_dicts([data]).run()
    assert [(r["id"], r["name"]) for r in _rows(tmp_path)] == [(1, "old")]


def test_a_backfill_swaps_the_files_its_loads_published_even_after_a_crash_midway(tmp_path: Path) -> None:
    """An appending dataset of three loads' files; a backfill read the second load again. Its
    files replace that load's (``retire``), the others stay as hard links, and a crash after part
    of the new folder was built is finished by running the step again."""
    lake = tmp_path / "lake" / "customers"
    for name, rows in (("l1.parquet", [1, 2]), ("l2.parquet", [3, 4]), ("l3.parquet", [5])):
        _parquet(lake / name, [{"id": i, "name": "first", "deleted": False} for i in rows])
    (lake / "_errors").mkdir()
    (lake / "_errors" / "bad.jsonl").write_text("{}\n")  # the bad records set aside stay too
    again = [
        _parquet(
            tmp_path / "t9" / "b.parquet", [{"id": i, "name": "again", "deleted": False} for i in (3, 4)]
        )
    ]
    data = {**_step(tmp_path, 9, "swap", again), "retire": ["l2.parquet"]}
    step = CommitStep.from_dict(data)
    new = _sibling(data["final"], "new", data["token"])
    step._keep(data["final"], new)  # type: ignore[attr-defined]  # then the crash, before the moves
    assert sorted(r["id"] for r in _rows(tmp_path)) == [1, 2, 3, 4, 5]  # readers: the old dataset whole
    assert CommitSequence.from_dicts([data]).run() == 1
    assert [(r["id"], r["name"]) for r in _rows(tmp_path)] == [
        (1, "first"),
        (2, "first"),
        (3, "again"),
        (4, "again"),
        (5, "first"),
    ]
    assert (lake / "l1.parquet").stat().st_nlink == 1 and not (lake / "l2.parquet").exists()
    assert (lake / "_errors" / "bad.jsonl").exists()
    assert CommitSequence.from_dicts([data]).run() == 0  # replayed: nothing swapped twice


@pytest.mark.parametrize("mode", ["overwrite", "merge", "history"])
def test_replacing_the_data_keeps_earlier_runs_bad_records(tmp_path: Path, mode: str) -> None:
    """Run 1's set-aside rows stay where its execution page links them when run 2 replaces the
    dataset, also when run 2's publish is run again after a crash."""
    _published(tmp_path, [1])
    errors = tmp_path / "lake" / "customers" / "_errors"
    errors.mkdir()
    (errors / "1-0.jsonl").write_text('{"reason": "3 field(s), expected 2"}\n')
    files = [_parquet(tmp_path / "t2" / "n.parquet", [{"id": 9, "name": "new", "deleted": False}])]
    data = _step(tmp_path, 2, mode, files)

    assert CommitSequence.from_dicts([data]).run() == 1
    assert CommitSequence.from_dicts([data]).run() == 0

    assert (errors / "1-0.jsonl").read_text() == '{"reason": "3 field(s), expected 2"}\n'
    assert sorted(p.name for p in errors.iterdir()) == ["1-0.jsonl"]
    assert 9 in [r["id"] for r in _rows(tmp_path)]  # the data was replaced all the same
