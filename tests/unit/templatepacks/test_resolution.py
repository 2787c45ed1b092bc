"""Resolving templates: inheritance, precedence, substitution, required
attributes (enforced), flat keys, and who may use which pack."""

from __future__ import annotations

import os

import pytest
from django.core.exceptions import ValidationError

from portal.templatepacks.services import (
    TemplateResolutionError,
    resolve_templates,
    validate_template_uris_for,
)
from tests.unit.templatepacks.factories import make_pack

JDBC = "pack://sales-pack/ingest/jdbc.template"
FLOW_PROPS = {"source.jdbc.schema": "jdbc:postgresql://db/sales", "source.jdbc.tables": "orders"}


def test_reader_resolves_a_template_with_its_parent_flow_winning(pack, reader):
    result = resolve_templates([JDBC], {**FLOW_PROPS, "writer.output.format": "csv"}, reader)

    props = result.properties
    assert props["writer.output.format"] == "csv"  # flow > parent
    assert props["job.commit.policy"] == "full"  # from the parent
    assert props["extract.namespace"] == "/var/flowport/lake"  # ${…} within the chain
    assert props["extract.table"] == "orders"  # ${…} filled from the flow
    assert props["converter.classes"] == "portal.pipeline.converters.Identity"  # list → comma string
    assert result.missing_required == []
    assert result.pinned_versions == {JDBC: 1, "pack://sales-pack/base.template": 1}


def test_child_template_beats_parent_and_flow_substitution_reaches_the_parent(owner):
    make_pack(
        owner,
        "p",
        {
            "parent.template": "a = parent\nb = parent\nroot = ${data.root}",
            "child.template": 'gobblin.template.inherit = "parent.template"\na = child',
        },
    )
    props = resolve_templates(["pack://p/child.template"], {"data.root": "/x"}, owner).properties
    assert (props["a"], props["b"], props["root"]) == ("child", "parent", "/x")


def test_missing_required_attributes_are_listed_not_guessed(pack, reader):
    result = resolve_templates([JDBC], {"source.jdbc.schema": "jdbc:x"}, reader)
    assert result.missing_required == ["source.jdbc.tables"]
    assert result.properties.get("extract.table", "") == ""  # never a guessed value


def test_flat_keys_that_hocon_cannot_hold_together_both_survive(pack, reader):
    props = resolve_templates(
        [JDBC], {**FLOW_PROPS, "converter.classes": "a.B", "converter.classes.0": "c.D"}, reader
    ).properties
    assert props["converter.classes"] == "a.B"
    assert props["converter.classes.0"] == "c.D"


def test_process_environment_never_leaks_into_job_properties(owner, monkeypatch):
    monkeypatch.setenv("FLOWPORT_TEST_SECRET", "s3cr3t")
    make_pack(owner, "leaky", {"t.template": "x = ${FLOWPORT_TEST_SECRET}\ny = ${?FLOWPORT_TEST_SECRET}"})
    result = resolve_templates(["pack://leaky/t.template"], {}, owner)
    assert "s3cr3t" not in str(result.properties)
    assert result.missing_required == ["FLOWPORT_TEST_SECRET"]
    assert os.environ["FLOWPORT_TEST_SECRET"] == "s3cr3t"


def test_fs_uri_maps_to_the_one_readable_pack_holding_the_path(pack, reader, owner):
    result = resolve_templates(["FS:///ingest/jdbc.template"], FLOW_PROPS, reader)
    assert result.properties["extract.table"] == "orders"
    make_pack(owner, "other-pack", {"ingest/jdbc.template": "a = 1"})
    with pytest.raises(TemplateResolutionError, match="several packs"):
        resolve_templates(["FS:///ingest/jdbc.template"], FLOW_PROPS, owner)
    # rita cannot read other-pack, so for her the path is not ambiguous
    assert resolve_templates(["FS:///ingest/jdbc.template"], FLOW_PROPS, reader).missing_required == []


def test_outsider_cannot_use_the_pack_and_learns_nothing(pack, outsider):
    with pytest.raises(TemplateResolutionError) as unreadable:
        resolve_templates([JDBC], FLOW_PROPS, outsider)
    with pytest.raises(TemplateResolutionError) as unknown:
        resolve_templates(["pack://no-such-pack/ingest/jdbc.template"], FLOW_PROPS, outsider)
    assert "does not exist or you cannot read it" in unreadable.value.message
    assert unreadable.value.message.replace("sales-pack", "X") == unknown.value.message.replace(
        "no-such-pack", "X"
    )
    with pytest.raises(TemplateResolutionError, match="no template pack you can read"):
        resolve_templates(["FS:///ingest/jdbc.template"], {}, outsider)


def test_staff_may_read_every_pack(pack, staff):
    assert resolve_templates([JDBC], FLOW_PROPS, staff).missing_required == []


def test_validate_template_uris_names_each_bad_uri(pack, reader, outsider):
    validate_template_uris_for(reader, [JDBC])
    with pytest.raises(ValidationError) as error:
        validate_template_uris_for(outsider, [JDBC, "pack://sales-pack/nope.template"])
    messages = error.value.message_dict["template_uris"]
    assert len(messages) == 2
    assert JDBC in messages[0]
    assert "nope.template" in messages[1]


def test_a_parent_in_an_unreadable_pack_is_an_error(owner, outsider):
    make_pack(owner, "private", {"base.template": "a = 1"})
    make_pack(outsider, "mine", {"child.template": 'a = 2\nb = "x"'})
    from portal.templatepacks import services

    pack = services.TemplatePack.objects.get(name="mine")
    with pytest.raises(ValidationError) as error:
        services.save_template(
            pack,
            user=outsider,
            path="child.template",
            text='gobblin.template.inherit = "pack://private/base.template"',
        )
    assert "unknown parent template" in str(error.value.message_dict["text"])


def test_several_parents_the_last_listed_winning_a_shared_grandparent_counted_once(owner):
    make_pack(
        owner,
        "multi",
        {
            "root.template": "shared = root\nonly.root = r",
            "left.template": 'gobblin.template.inherit = "root.template"\nshared = left\nside = left',
            "right.template": 'gobblin.template.inherit = "root.template"\nside = right',
            "child.template": 'gobblin.template.inherit = "left.template, right.template"',
        },
    )
    props = resolve_templates(["pack://multi/child.template"], {}, owner).properties
    assert props["side"] == "right"  # right is listed last
    # right falls back on root, visited first; left's own value still beats root's
    # only where right and its ancestors are silent: as Typesafe's withFallback chain.
    assert props["shared"] == "root"
    assert props["only.root"] == "r"


def test_templates_that_inherit_each_other_resolve_each_template_once_as_gobblin_does(owner):
    """Gobblin's InheritingJobTemplateTest.testLoopInheritance: template1 → template2 →
    template3 → template1. Each template is inherited once; the way back is not followed."""
    loop = {
        "template1.template": 'gobblin.template.inherit = "template2.template"\nkey1 = value1\n'
        'gobblin.template.required_attributes = "required"',
        "template2.template": 'gobblin.template.inherit = "template3.template"\nkey2 = value2',
        "template3.template": 'gobblin.template.inherit = "template1.template"\nkey3 = value3\n'
        'gobblin.template.required_attributes = "required3"\nkey1 = from3',
    }
    make_pack(owner, "loop", loop)  # the upload accepts it

    result = resolve_templates(["pack://loop/template1.template"], {"required": "r1"}, owner)
    props = result.properties
    assert (props["key1"], props["key2"], props["key3"]) == ("value1", "value2", "value3")
    assert props["required"] == "r1"
    assert result.missing_required == ["required3"]
    assert set(result.pinned_versions) == {f"pack://loop/{path}" for path in loop}
    # From the loop's other end, template3 wins over the templates it (indirectly) inherits.
    assert resolve_templates(["pack://loop/template3.template"], {}, owner).properties["key1"] == "from3"


def test_a_template_that_inherits_itself_is_itself(owner):
    make_pack(owner, "self", {"a.template": 'gobblin.template.inherit = "a.template"\nx = 1'})
    assert resolve_templates(["pack://self/a.template"], {}, owner).properties["x"] == "1"


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("a.x = 1\ny = ${?a.b.c}", {"a.x": "1"}),  # no field at all
        ('a.b = 1\ny = "p/"${?a.b.c}', {"a.b": "1", "y": "p/"}),  # through a string: unset, not an error
        ("y = 5\ny = ${?nope}", {"y": "5"}),  # keeps the value it would override
    ],
)
def test_an_unset_optional_substitution_resolves_to_nothing(owner, template, expected):
    make_pack(owner, "opt", {"t.template": template})
    assert resolve_templates(["pack://opt/t.template"], {}, owner).properties == expected
