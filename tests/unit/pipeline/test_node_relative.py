"""A flow narrows its source node with folder names, a glob and reader options: each stays a name
inside the node, and a reader option that names a file is handed to Spark as its real path there."""

from __future__ import annotations

from pathlib import Path

import pytest

from portal.pipeline import node_relative
from portal.pipeline.confinement import ConfinementError, relative_name_problem


@pytest.mark.parametrize("name", ["orders", "orders-2024", "a.b", "ENC-like(x)"])
def test_plain_folder_names_pass(name):
    assert relative_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("..", "'..'"),
        ("a/../b", "'..'"),
        ("/etc", "absolute"),
        ("~root", "absolute"),
        ("file:/etc", "absolute"),
        ("hdfs://nn/x", "absolute"),
        ("%2e%2e", "'%'"),
        ("..\\x", "backslash"),
        ("a/b", "one folder"),
        ("a//b", "empty segment"),
        ("  ", "empty"),
    ],
)
def test_anything_else_is_refused_with_its_reason(name, words):
    assert words in (relative_name_problem(name) or "")


def test_a_list_is_refused_for_its_one_bad_entry_naming_it():
    problems = node_relative.problems({"source.files.datasets": "orders, ../x, refunds"})
    assert problems == [
        "'source.files.datasets': '../x' has a '.', '..' or empty segment; give folder names inside the data node"
    ]


def test_a_value_left_for_a_later_substitution_is_not_judged_yet():
    assert node_relative.problems({"source.files.glob": "${branch.glob}"}) == []


def test_only_parsing_options_pass_case_insensitively():
    assert (
        node_relative.problems({"source.files.option.NULLVALUE": "NA", "source.files.option.sep": ";"}) == []
    )
    refused = node_relative.problems({"source.files.option.basePath": "/"})
    assert refused and "'source.files.option.basePath' is not a reader option" in refused[0]


def test_a_schema_file_inside_the_node_is_given_to_spark_as_its_real_path(tmp_path: Path):
    root = tmp_path / "landing"
    (root / "schemas").mkdir(parents=True)
    (root / "schemas" / "order.avsc").write_text("{}")
    (root / "current.avsc").symlink_to(root / "schemas" / "order.avsc")
    options = node_relative.reader_options(
        {"source.files.option.avroSchemaUrl": "current.avsc", "source.files.option.mode": "FAILFAST"},
        str(root),
    )
    assert options == {"avroSchemaUrl": str((root / "schemas" / "order.avsc").resolve()), "mode": "FAILFAST"}


def test_a_schema_file_linked_out_of_the_node_is_refused_without_saying_where(tmp_path: Path):
    root = tmp_path / "landing"
    root.mkdir()
    (tmp_path / "secret").write_text("s")
    (root / "leak.avsc").symlink_to(tmp_path / "secret")
    with pytest.raises(ConfinementError) as refused:
        node_relative.reader_options({"source.files.option.avroSchemaUrl": "leak.avsc"}, str(root))
    assert "leads outside its data node" in str(refused.value)
    assert str(tmp_path / "secret") not in str(refused.value)
