"""Paths stay inside their roots: what the worker's guard and the publisher rely on."""

from __future__ import annotations

import pytest

from portal.pipeline.confinement import ConfinementError, confine, is_inside


def test_a_path_below_its_root_is_inside(tmp_path):
    assert is_inside(str(tmp_path / "a" / "b"), str(tmp_path))
    assert is_inside(str(tmp_path), str(tmp_path))
    assert is_inside(f"file://{tmp_path}/a", str(tmp_path))


@pytest.mark.parametrize("escape", ["/etc", "{root}/../x", "{root}/a/../../x", "{root}x"])
def test_escapes_are_outside(tmp_path, escape):
    root = tmp_path / "root"
    root.mkdir()
    path = escape.format(root=root)
    assert not is_inside(path, str(root))
    with pytest.raises(ConfinementError, match="lies outside"):
        confine(path, str(root), "data.publisher.final.dir")


def test_a_symlink_out_of_the_root_is_outside(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to("/etc")
    assert not is_inside(str(root / "link" / "passwd"), str(root))


def test_hadoop_uris_stay_on_their_file_system():
    assert is_inside("hdfs://nn:8020/lake/g/f", "hdfs://nn:8020/lake")
    assert not is_inside("hdfs://other:8020/lake/g/f", "hdfs://nn:8020/lake")
    assert not is_inside("s3a://bucket/lake", "hdfs://nn:8020/lake")
    assert not is_inside("hdfs://nn:8020/lake/../etc", "hdfs://nn:8020/lake")
