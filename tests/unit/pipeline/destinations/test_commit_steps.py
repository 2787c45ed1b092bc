"""Commit steps: verify/execute semantics, idempotent sequences, conflicts never overwritten."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from portal.pipeline.destinations.commit_steps import (
    CommitSequence,
    CommitStep,
    FsRenameCommitStep,
    JdbcPublishCommitStep,
)
from portal.pipeline.errors import CommitConflictError, ConfigError


def _file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_fs_rename_sequence_is_idempotent_and_survives_a_crash_midway(tmp_path: Path) -> None:
    srcs = [_file(tmp_path / "task-output" / f"part-{i}.parquet", f"data{i}") for i in range(3)]
    dsts = [tmp_path / "job-output" / "ds" / f"part-{i}.parquet" for i in range(3)]
    dicts = [
        FsRenameCommitStep(str(s), str(d), len(f"data{i}")).to_dict()
        for i, (s, d) in enumerate(zip(srcs, dsts, strict=True))
    ]
    # The previous run crashed after the first rename.
    CommitStep.from_dict(dicts[0]).execute()
    assert CommitSequence.from_dicts(dicts).run() == 2
    assert [d.read_text() for d in dsts] == ["data0", "data1", "data2"]
    assert CommitSequence.from_dicts(dicts).run() == 0  # a second run changes nothing
    assert not any(s.exists() for s in srcs)


def test_fs_rename_refuses_to_overwrite_different_content(tmp_path: Path) -> None:
    src = _file(tmp_path / "out" / "f", "new")
    dst = _file(tmp_path / "final" / "f", "old!")
    step = FsRenameCommitStep(str(src), str(dst))
    with pytest.raises(CommitConflictError, match="exists with different content"):
        step.verify()
    same = _file(tmp_path / "out" / "g", "same")
    _file(tmp_path / "final" / "g", "same")
    assert FsRenameCommitStep(str(same), str(tmp_path / "final" / "g")).verify() is True
    gone = FsRenameCommitStep(str(tmp_path / "out" / "missing"), str(tmp_path / "final" / "missing"))
    with pytest.raises(CommitConflictError, match="does not exist"):
        gone.verify()
    resized = FsRenameCommitStep(str(tmp_path / "out" / "x"), str(dst), size=99)
    with pytest.raises(CommitConflictError, match="expected 99"):
        resized.verify()


def test_fs_rename_on_hadoop_uris_goes_through_the_jvm(spark: SparkSession, tmp_path: Path) -> None:
    src = _file(tmp_path / "out" / "a" / "part-0", "hello")
    step = FsRenameCommitStep(f"file://{src}", f"file://{tmp_path}/final/a/part-0", 5)
    assert step.verify() is False
    CommitSequence([step]).run()
    assert (tmp_path / "final" / "a" / "part-0").read_text() == "hello"
    assert step.verify() is True


def test_unknown_step_types_need_registration() -> None:
    # high_watermark is registered by the orchestration layer's state store;
    # a type nobody registered is refused by name.
    with pytest.raises(ConfigError, match="unknown commit step type 'carrier_pigeon'"):
        CommitStep.from_dict({"type": "carrier_pigeon", "dataset_urn": "d", "value": "1"})


def test_a_stored_step_names_its_type_not_its_module_so_old_rows_read_back() -> None:
    # Rows the CommitStepStore held before the destinations package existed: JSON with a type
    # name and fields, no class path, so the move of the classes leaves them readable.
    stored = [
        {"type": "fs_rename", "src": "/w/out/a.parquet", "dst": "/lake/a.parquet", "size": 3, "branch": 0},
        {"type": "fs_replace", "final": "/lake/d", "token": "7:j:d:0", "mode": "overwrite", "files": []},
        {
            "type": "jdbc_publish",
            "url": "jdbc:postgresql://db/x",
            "user": "u",
            "password_property": "writer.jdbc.password",
            "target_table": "t",
            "staging_tables": ["fp_stg_1"],
            "execution_id": 7,
            "job_name": "j",
        },
        {
            "type": "iceberg_commit",
            "catalog_uri": "sqlite:////lake/catalog.db",
            "warehouse": "/lake/wh",
            "namespace": "g",
            "table": "t",
            "execution_id": 7,
            "job_name": "j",
        },
    ]
    steps = [CommitStep.from_dict(row, {"writer.jdbc.password": "pw"}) for row in stored]
    assert [type(step).__name__ for step in steps] == [
        "FsRenameCommitStep",
        "FsReplaceCommitStep",
        "JdbcPublishCommitStep",
        "IcebergCommitStep",
    ]
    assert {type(step).__module__.rpartition(".")[0] for step in steps} == {"portal.pipeline.destinations"}
    assert [step.to_dict()["type"] for step in steps] == [row["type"] for row in stored]
    assert steps[2].password == "pw"  # type: ignore[attr-defined]
    assert "pw" not in str(steps[2].to_dict())


def _staging(pg: psycopg.Connection, name: str, rows: int) -> None:
    pg.execute(f"DROP TABLE IF EXISTS {name}")
    pg.execute(f"CREATE TABLE {name} (id int, v text)")
    pg.execute(f"INSERT INTO {name} SELECT g, 'v' || g FROM generate_series(1, {rows}) g")  # noqa: S608


def test_jdbc_publish_moves_rows_once_and_detects_conflicting_markers(
    pg: psycopg.Connection, pg_database: dict[str, Any]
) -> None:
    pg.execute("DROP TABLE IF EXISTS pub_target")
    pg.execute("DROP TABLE IF EXISTS pub_markers")
    _staging(pg, "pub_stg_a", 3)
    _staging(pg, "pub_stg_b", 2)
    data = {
        "type": "jdbc_publish",
        "dataset_urn": "orders",
        "branch": 0,
        "url": pg_database["url"],
        "user": pg_database["user"],
        "password_property": "writer.jdbc.password",
        "target_table": "pub_target",
        "marker_table": "pub_markers",
        "staging_tables": ["pub_stg_a", "pub_stg_b"],
        "rows": 5,
        "execution_id": 42,
        "job_name": "job",
    }
    step = CommitStep.from_dict(data, {"writer.jdbc.password": "pw"})
    assert isinstance(step, JdbcPublishCommitStep) and step.password == "pw"
    assert "pw" not in str(step.to_dict())
    assert step.verify() is False
    assert CommitSequence([step]).run() == 1
    assert CommitSequence([CommitStep.from_dict(data)]).run() == 0
    assert pg.execute("SELECT count(*) FROM pub_target").fetchone()[0] == 5
    assert pg.execute("SELECT to_regclass('pub_stg_a')").fetchone()[0] is None

    conflicting = CommitStep.from_dict({**data, "rows": 6})
    with pytest.raises(CommitConflictError, match="records 5 row"):
        conflicting.verify()


def test_jdbc_publish_is_all_or_nothing(pg: psycopg.Connection, pg_database: dict[str, Any]) -> None:
    pg.execute("DROP TABLE IF EXISTS aon_target")
    _staging(pg, "aon_stg", 3)
    step = CommitStep.from_dict(
        {
            "type": "jdbc_publish",
            "dataset_urn": "d",
            "branch": 0,
            "url": pg_database["url"],
            "user": pg_database["user"],
            "target_table": "aon_target",
            "marker_table": "aon_markers",
            "staging_tables": ["aon_stg", "aon_missing"],
            "rows": 3,
            "execution_id": 1,
            "job_name": "job",
        }
    )
    with pytest.raises(CommitConflictError, match="aon_missing is gone"):
        step.execute()
    # The transaction rolled back: the staging rows were not appended and the staging table survives.
    assert pg.execute("SELECT to_regclass('aon_target')").fetchone()[0] is None
    assert pg.execute("SELECT count(*) FROM aon_stg").fetchone()[0] == 3
