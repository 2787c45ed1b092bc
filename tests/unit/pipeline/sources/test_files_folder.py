"""A downstream flow reads one upstream flow's own output (`source.files.folder`, the
`<flowGroup>/<flowName>` folder that flow publishes into under the node), not the whole node:
its datasets are that folder's sub-folders, and the folder is refused where it would lead out."""

from __future__ import annotations

import pytest

from portal.pipeline import node_relative
from portal.pipeline.confinement import ConfinementError
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.properties import Properties
from portal.pipeline.sources.base import SourceContext
from portal.pipeline.sources.files import FileSource


def _source(root, **props: str) -> FileSource:
    values = {"source.files.path": str(root), "source.files.format": "csv", **props}
    context = SourceContext(None, JobSpec("job", properties=values), Properties(values), str(root))  # type: ignore[arg-type]
    return FileSource(context)


@pytest.fixture
def lake(tmp_path):
    root = tmp_path / "lake"
    for flow, dataset in (("orders", "orders"), ("orders", "refunds"), ("stock", "stock")):
        (root / "sales" / flow / dataset).mkdir(parents=True)
        (root / "sales" / flow / dataset / "part-0.csv").write_text("id\n1\n")
    return root


def test_the_folder_narrows_the_read_to_one_upstream_flows_datasets(lake):
    units = _source(lake, **{"source.files.folder": "sales/orders"}).get_work_units()
    assert sorted(unit.dataset_urn for unit in units) == ["orders", "refunds"]
    assert all("/sales/orders/" in unit.payload["files"][0] for unit in units)

    whole = _source(lake).get_work_units()
    assert [unit.dataset_urn for unit in whole] == ["sales"]  # the group: every flow's output


def test_a_folder_leading_out_of_the_node_is_refused(lake, tmp_path):
    for bad in ("../elsewhere", "/etc", "sales/../../x"):
        assert node_relative.problems({"source.files.folder": bad}), bad
        with pytest.raises(ConfinementError):
            _source(lake, **{"source.files.folder": bad}).get_work_units()
    (tmp_path / "outside").mkdir()
    (lake / "sales" / "link").symlink_to(tmp_path / "outside")
    with pytest.raises(ConfinementError, match="leads outside its data node"):
        _source(lake, **{"source.files.folder": "sales/link"}).get_work_units()
