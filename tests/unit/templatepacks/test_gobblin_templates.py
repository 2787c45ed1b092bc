"""Gobblin's own job templates (copies in gobblin_templates/, Apache License
2.0, each naming its source) resolve in Flowport to exactly what Typesafe
Config gives for them (expected/*.tsv, produced with Typesafe Config 1.4.1 as
each file's header says): several parents in `gobblin.template.inherit`, and
the multi-hop distcp template's optional `${?…subPaths}`."""

from __future__ import annotations

from pathlib import Path

import pytest

from portal.templatepacks.resolution import resolve_templates
from tests.unit.templatepacks.factories import stored_pack

pytestmark = pytest.mark.django_db

HERE = Path(__file__).parent / "gobblin_templates"
HOP_PROPERTIES = {
    "gobblin.flow.edge.input.dataset.descriptor.path": "/in",
    "gobblin.flow.edge.output.dataset.descriptor.path": "/out",
    "source.data.node.fs.uri": "hdfs://src:8020",
    "destination.data.node.fs.uri": "hdfs://dst:8020",
    "user.to.proxy": "alice",
    "flow.executionId": "1700000000000",
}


def typesafe(case: str) -> dict[str, str]:
    lines = (HERE / "expected" / f"{case}.tsv").read_text().splitlines()
    return dict(line.split("\t", 1) for line in lines if line and not line.startswith("#"))


@pytest.fixture
def gobblin_pack(owner):
    files = {str(p.relative_to(HERE)): p.read_text() for p in HERE.rglob("*.template")}
    return stored_pack(owner, "gobblin", files)


@pytest.mark.parametrize(
    ("case", "uri", "properties"),
    [
        (
            "multi",
            "pack://gobblin/templates/test-multitemplate-with-inheritance.template",
            {"required0": "r0"},
        ),
        ("distcp", "pack://gobblin/templates/distcp.template", {"from": "/data/in", "to": "/data/out"}),
        ("multihop", "pack://gobblin/multihop/distcp.template", HOP_PROPERTIES),
        (
            "multihop-subpaths",
            "pack://gobblin/multihop/distcp.template",
            {**HOP_PROPERTIES, "gobblin.flow.edge.input.dataset.descriptor.subPaths": "{a,b}"},
        ),
    ],
)
def test_a_gobblin_template_resolves_as_typesafe_config_resolves_it(
    owner, gobblin_pack, case, uri, properties
):
    resolved = resolve_templates([uri], properties, owner)
    assert resolved.properties == typesafe(case)


def test_the_last_listed_parent_wins_and_every_parents_requirements_count(owner, gobblin_pack):
    resolved = resolve_templates(
        ["pack://gobblin/templates/test-multitemplate-with-inheritance.template"], {}, owner
    )
    # distcp-ng is listed after test-overwrite: its required-attributes list is the one kept…
    assert resolved.properties["gobblin.template.required_attributes"] == (
        "data.publisher.final.dir,gobblin.dataset.pattern"
    )
    # …while, as Gobblin's getRequiredConfigList, each parent's own list still counts.
    assert set(resolved.missing_required) == {
        "required0",
        "required1",
        "required2",
        "data.publisher.final.dir",
        "gobblin.dataset.pattern",
    }
