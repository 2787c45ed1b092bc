"""Where an Iceberg catalog may send the FileIO (portal.pipeline.destinations.iceberg_confine)."""

from __future__ import annotations

import pytest

from portal.pipeline.destinations.iceberg_confine import (
    ConfinedFileIO,
    IcebergLocationError,
    catalog_properties,
)


@pytest.fixture
def io(tmp_path) -> ConfinedFileIO:
    (tmp_path / "wh" / "ns" / "t").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "secret").write_text("s3cret")
    return ConfinedFileIO(catalog_properties(f"file://{tmp_path / 'wh'}"))


def test_inside_the_warehouse_is_read_and_written(io, tmp_path):
    with io.new_output(f"file://{tmp_path}/wh/ns/t/a.json").create() as out:
        out.write(b"{}")
    assert io.new_input(str(tmp_path / "wh" / "ns" / "t" / "a.json")).open().read() == b"{}"


@pytest.mark.parametrize(
    "where",
    [
        "{tmp}/other/secret",
        "file://{tmp}/other/secret",
        "{tmp}/wh/../other/secret",
        "s3://bucket/wh/x",
        "/etc/passwd",
    ],
)
def test_anything_outside_is_refused_without_being_touched(io, tmp_path, where):
    location = where.format(tmp=tmp_path)
    for touch in (io.new_input, io.new_output, io.delete):
        with pytest.raises(IcebergLocationError, match="outside the destination's warehouse") as refused:
            touch(location)
        assert "s3cret" not in str(refused.value) and str(tmp_path) not in str(refused.value)
    assert (tmp_path / "other" / "secret").read_text() == "s3cret"


def test_a_symlink_in_the_warehouse_is_judged_where_it_leads(io, tmp_path):
    (tmp_path / "wh" / "ns" / "link").symlink_to(tmp_path / "other")
    with pytest.raises(IcebergLocationError):
        io.new_input(str(tmp_path / "wh" / "ns" / "link" / "secret"))
