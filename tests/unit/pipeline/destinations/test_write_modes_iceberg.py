"""Write modes of an Iceberg destination on a real SQL catalog: overwrite, merge with deletes and
history each land as one Iceberg commit, and a replay after a crash (before the watermark step)
commits nothing twice. Task output is written by hand (no Spark), as a task leaves it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from portal.pipeline.destinations.commit_steps import CommitSequence
from portal.pipeline.destinations.iceberg import load_catalog


class Lake:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.uri, self.warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", str(tmp_path / "warehouse")

    def publish(
        self,
        execution: int,
        mode: str,
        rows: list[tuple[int, str, bool]],
        extra: dict[str, list[Any]] | None = None,
    ) -> int:
        """``extra``: columns of this run only, before the delete column (a source's new column)."""
        out = self.tmp / "work" / str(execution) / f"task_job_{execution}_0" / "branch_0"
        out.mkdir(parents=True)
        table = pa.table(
            {
                "id": pa.array([r[0] for r in rows], pa.int64()),
                "name": [r[1] for r in rows],
                **(extra or {}),
                "deleted": [r[2] for r in rows],
            }
        )
        pq.write_table(table, out / "part-0.parquet")
        step: dict[str, Any] = {
            "type": "iceberg_commit",
            "dataset_urn": "customers",
            "branch": 0,
            "catalog_uri": self.uri,
            "warehouse": self.warehouse,
            "namespace": "crm",
            "table": "customers",
            "mode": mode,
            "merge_keys": ["id"],
            "merge_order": None,
            "delete_column": "deleted",
            "execution_id": execution,
            "job_name": "job",
            "flow": "tests/pipeline",
            "files": [{"src": str(out / "part-0.parquet"), "relative": "part-0.parquet"}],
            "rows": len(rows),
            "watermark": str(execution),
        }
        done = CommitSequence.from_dicts([step], {}, "customers").run()
        assert CommitSequence.from_dicts([step], {}, "customers").run() == 0  # the replay
        return done

    def table(self) -> Any:
        return load_catalog(self.uri, None, self.warehouse).load_table(("crm", "customers"))

    def rows(self) -> list[dict[str, Any]]:
        return sorted(self.table().scan().to_arrow().to_pylist(), key=lambda r: (r["id"], r["name"]))


def test_overwrite_replaces_the_table_in_one_commit(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    lake.publish(1, "overwrite", [(1, "ann", False), (2, "bob", False)])
    before = len(lake.table().metadata.snapshots)
    assert lake.publish(2, "overwrite", [(3, "cid", False)]) == 1
    assert [(r["id"], r["name"]) for r in lake.rows()] == [(3, "cid")]
    # The delete and the new files are one transaction: every snapshot of it names the run.
    added = lake.table().metadata.snapshots[before:]
    assert {s.summary.additional_properties.get("flowport.execution-id") for s in added} == {"2"}


def test_merge_deletes_the_keys_marked_deleted(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    lake.publish(1, "merge", [(1, "ann", False), (2, "bob", False)])
    lake.publish(2, "merge", [(2, "bob", True), (3, "cid", False), (1, "anna", False)])
    assert [(r["id"], r["name"]) for r in lake.rows()] == [(1, "anna"), (3, "cid")]


def test_a_merge_after_the_source_gained_a_column_adds_it_and_merges_by_key(tmp_path: Path) -> None:
    """The new column lies before the delete column in the run's rows but is added at the table's
    end: the merge still matches keys, deletes, and the older rows read it as NULL."""
    lake = Lake(tmp_path)
    lake.publish(1, "merge", [(1, "ann", False), (2, "bob", False), (3, "cid", False)])
    lake.publish(
        2,
        "merge",
        [(2, "bob", True), (3, "cid", False), (4, "dan", False)],
        {"tier": ["x", "gold", "silver"]},
    )
    assert lake.table().schema().column_names == ["id", "name", "deleted", "tier"]
    assert [(r["id"], r["name"], r["tier"]) for r in lake.rows()] == [
        (1, "ann", None),
        (3, "cid", "gold"),
        (4, "dan", "silver"),
    ]
    lake.publish(3, "merge", [(1, "anne", False)])  # a run without the column: the table keeps it
    assert [(r["id"], r["name"], r["tier"]) for r in lake.rows()] == [
        (1, "anne", None),
        (3, "cid", "gold"),
        (4, "dan", "silver"),
    ]


def test_history_keeps_every_version(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    lake.publish(1, "history", [(1, "ann", False), (2, "bob", False)])
    lake.publish(2, "history", [(1, "ann", False), (2, "bobby", False), (3, "cid", False)])
    rows = [(r["id"], r["name"], r["is_current"], r["valid_to"] is None) for r in lake.rows()]
    assert rows == [
        (1, "ann", True, True),
        (2, "bob", False, False),
        (2, "bobby", True, True),
        (3, "cid", True, True),
    ]
