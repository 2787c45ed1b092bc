"""The property schema is the one declaration of every key the pipeline reads: the worker parses
with it, the save checks with it, and docs/properties.md is written from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from portal.pipeline import propertydoc, propertyrules
from portal.pipeline.destinations import table_templates
from portal.pipeline.destinations.builder import ALL_FORMATS
from portal.pipeline.errors import ConfigError
from portal.pipeline.jobcheck import job_property_problems
from portal.pipeline.properties import Properties
from portal.pipeline.propertyrules import SPECS, spec_for
from portal.pipeline.sources.files import FORMATS

ROOT = Path(__file__).resolve().parents[3]
PIPELINE = ROOT / "portal" / "pipeline"
READ = re.compile(
    r"\.(?:require|get|get_int|get_float|get_bool|get_list|get_mapping|get_choice|describe)\(\s*"
    r"f?\"([a-z][a-z0-9_]*(?:\.[a-z0-9_{}]+)+)\""
)


def keys_read_by_the_pipeline() -> set[str]:
    found = set()
    for path in PIPELINE.rglob("*.py"):
        if path.parent.name in ("nodekinds", "discovery"):  # a data node's properties, not the job's
            continue
        for key in READ.findall(path.read_text()):
            found.add(re.sub(r"\{i\}", "0", re.sub(r"\{name\}", "x", key)))
    return found


def test_every_key_the_pipeline_reads_is_declared():
    read = keys_read_by_the_pipeline()
    assert len(read) > 60
    assert sorted(key for key in read if spec_for(key) is None) == []


def test_the_declared_values_are_the_ones_the_pipeline_knows():
    assert set(spec_for("source.files.format").choices) == set(FORMATS)
    assert set(spec_for("writer.output.format").choices) == set(ALL_FORMATS)
    assert len({spec.key for spec in SPECS}) == len(SPECS)


def test_the_reference_page_is_generated_from_the_schema():
    committed = (ROOT / "docs" / "properties.md").read_text()
    assert committed == propertydoc.render(), (
        "docs/properties.md is stale: run `.venv/bin/python -m portal.pipeline.propertydoc docs/properties.md`"
    )
    for spec in SPECS:
        assert f"| `{spec.key}` |" in committed


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"fork.branches": "2.5"}, "property 'fork.branches' must be an integer, got '2.5'"),
        ({"fork.one.pass": "sometimes"}, "property 'fork.one.pass' must be true or false, got 'sometimes'"),
        (
            {"converter.rename.fields": "a"},
            "property 'converter.rename.fields': expected 'name:value' pairs, got 'a'",
        ),
        (
            {"job.commit.policy": "never"},
            "unknown value 'never' in 'job.commit.policy' (supported: full, partial, successful, "
            "commit_on_full_success, commit_on_partial_success, commit_successful_tasks)",
        ),
    ],
)
def test_the_worker_and_the_save_refuse_a_value_with_one_message(values, message):
    key = next(iter(values))
    reader = {"fork.branches": "get_int", "fork.one.pass": "get_bool"}.get(key)
    reader = reader or {"converter.rename.fields": "get_mapping"}.get(key, "get_choice")
    with pytest.raises(ConfigError) as refused:
        getattr(Properties(values), reader)(key)
    assert str(refused.value) == message
    assert job_property_problems(values) == [message]


def test_required_keys_follow_the_source_and_each_branchs_destination():
    files_job = {"flowport.hop.source.kind": "files", "flowport.hop.destination.kind": "files"}
    assert job_property_problems(files_job) == ["missing required property 'source.files.format'"]
    assert job_property_problems({**files_job, "source.files.format": "csv"}) == []
    jdbc = {"flowport.hop.source.kind": "jdbc", "flowport.hop.destination.kind": "files"}
    assert job_property_problems(jdbc) == [
        "missing required property 'source.jdbc.tables'",
        "missing required property 'extract.delta.fields' (unless extract.is.full=true)",
    ]
    assert job_property_problems({**jdbc, "source.jdbc.tables": "t", "extract.is.full": "true"}) == []
    # Two branches into a JDBC destination: a branch that names no table writes each dataset into
    # a table named as its source table.
    forked = {
        **files_job,
        "source.files.format": "csv",
        "fork.branches": "2",
        "writer.output.format.0": "jdbc",
        "writer.output.format.1": "jdbc",
        "writer.jdbc.table.0": "t0",
    }
    assert job_property_problems(forked) == []
    props = Properties(forked)
    assert table_templates.target(props.for_branch(0, 2, "fork_0"), "public.orders") == "t0"
    assert table_templates.target(props.for_branch(1, 2, "fork_1"), "public.orders") == "orders"
    # A later hop replicates what its parent published: only its writer is judged.
    assert job_property_problems(files_job, first_hop=False) == []


def test_a_bare_writer_key_with_two_branches_is_refused_before_the_run():
    values = {"flowport.hop.source.kind": "files", "source.files.format": "csv", "fork.branches": "2"}
    problems = job_property_problems({**values, "writer.codec": "snappy"})
    assert problems == [
        "'writer.codec' has no branch suffix but fork.branches=2; set 'writer.codec.0' .. 'writer.codec.1' instead"
    ]


@pytest.mark.parametrize(
    ("typed", "closest"),
    [
        ("source.file.fromat", "source.files.format"),
        ("source.jdbc.table", "source.jdbc.tables"),
        ("writer.output.formats", "writer.output.format"),
        ("writer.output.formt.1", "writer.output.format"),  # a branch's key: the suffix is no typo
    ],
)
def test_a_misspelt_key_is_matched_to_the_closest_known_one(typed, closest):
    assert propertyrules.closest_known_key(typed) == closest


@pytest.mark.parametrize(
    "key", ["source.files.format", "writer.output.format.1", "source.files.option.header", "team.cost.centre"]
)
def test_known_keys_and_custom_keys_unlike_any_known_one_are_not_misspellings(key):
    assert propertyrules.closest_known_key(key) is None


def test_the_callers_own_keys_count_as_known():
    assert (
        propertyrules.closest_known_key("flow.catchupPolicy", {"flow.catchUpPolicy"}) == "flow.catchUpPolicy"
    )
    assert propertyrules.closest_known_key("flow.catchUpPolicy", {"flow.catchUpPolicy"}) is None
