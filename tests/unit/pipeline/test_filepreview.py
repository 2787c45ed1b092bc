"""The first rows of a files dataset with pyarrow: Parquet, CSV (compressed too) and JSON lines,
at most the rows asked for, across files in their order; a file that is gone is counted; every
file opened only by a real path inside the node's root (a link out of it is refused)."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from portal.pipeline.confinement import ConfinementError
from portal.pipeline.filepreview import PreviewError, first_rows


@pytest.fixture
def root(tmp_path):
    folder = tmp_path / "node" / "sales" / "orders"
    folder.mkdir(parents=True)
    return tmp_path / "node"


def test_parquet_rows_across_files_up_to_the_limit(root):
    folder = root / "sales" / "orders"
    pq.write_table(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}), folder / "part-0.parquet")
    pq.write_table(pa.table({"name": ["d", "e"], "id": [4, 5]}), folder / "part-1.parquet")

    found = first_rows(
        str(folder), ["part-0.parquet", "part-1.parquet", "part-2.parquet"], str(root), "PARQUET", 4
    )

    assert found.columns == ["id", "name"]
    assert found.rows == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]  # the second file's columns by name
    assert found.files_read == 2 and found.missing == []


def test_csv_gzip_and_json_lines(root):
    folder = root / "sales" / "orders"
    (folder / "part-0.csv.gz").write_bytes(gzip.compress(b"id,name\n1,ann\n2,bob\n"))
    (folder / "part-1.json").write_text("\n".join(json.dumps({"id": i, "ok": True}) for i in range(30)))

    assert first_rows(str(folder), ["part-0.csv.gz"], str(root), "CSV", 20).rows == [(1, "ann"), (2, "bob")]
    rows = first_rows(str(folder), ["part-1.json"], str(root), "JSON", 20)
    assert rows.columns == ["id", "ok"] and len(rows.rows) == 20


def test_files_that_are_gone_are_counted_and_none_left_is_an_error(root):
    folder = root / "sales" / "orders"
    pq.write_table(pa.table({"id": [1]}), folder / "part-1.parquet")

    found = first_rows(str(folder), ["part-0.parquet", "part-1.parquet"], str(root), "PARQUET", 20)
    assert found.missing == ["part-0.parquet"] and found.rows == [(1,)]
    with pytest.raises(PreviewError, match="no longer there"):
        first_rows(str(folder), ["part-0.parquet"], str(root), "PARQUET", 20)


def test_a_link_or_a_path_out_of_the_root_is_refused_without_naming_its_target(root, tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("password\nhunter2\n")
    folder = root / "sales" / "orders"
    (folder / "part-0.csv").symlink_to(secret)

    with pytest.raises(ConfinementError) as refused:
        first_rows(str(folder), ["part-0.csv"], str(root), "CSV", 20)
    assert str(secret) not in str(refused.value)
    with pytest.raises(ConfinementError):
        first_rows(str(folder), ["../../../secret.csv"], str(root), "CSV", 20)
    with pytest.raises(ConfinementError):
        first_rows(str(tmp_path), ["secret.csv"], str(root), "CSV", 20)
