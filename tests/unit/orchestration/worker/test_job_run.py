"""A worker's run reads its JobSpec once: the one parsed JobSpec goes from
recovery through the pull and the commit to the figures of the status."""

from __future__ import annotations

from typing import Any

import pytest

from portal.pipeline.jobspec import JobSpec

in_db = pytest.mark.django_db(transaction=True)


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The job names of every JobSpec parsed from a dict from now on."""
    parsed: list[str] = []
    original = JobSpec.from_dict.__func__  # type: ignore[attr-defined]

    def counting(cls: type[JobSpec], data: dict[str, Any] | JobSpec) -> JobSpec:
        if not isinstance(data, JobSpec):
            parsed.append(str(data.get("job_name")))
        return original(cls, data)

    monkeypatch.setattr(JobSpec, "from_dict", classmethod(counting))
    return parsed


@in_db
def test_a_run_that_recovers_pulls_and_commits_parses_its_jobspec_once(world, parses):
    for dataset in ("customers", "orders"):
        world.landing.add(dataset, 3)
        world.landing.add(dataset, 2)
    assert world.run(world.new_job(), "after_step:1@orders") == "crashed"  # leaves steps to recover
    world.landing.add("orders", 4)
    parses.clear()

    assert world.run(world.new_job()) == "committed"

    assert parses == ["eo_job"]
    assert world.exactly_once() == (0, 0)
    pulled = world.pipeline.specs[-1]
    assert isinstance(pulled, JobSpec) and pulled.previous_watermarks  # the pull read the recovered state


@in_db
def test_a_run_over_a_source_with_no_dataset_says_so(world):
    """A file at a files node's root is no dataset (each sub-folder is one): the run commits
    nothing and says why, where it used to say only "0 task(s)"."""
    (world.landing.root / "stray.json").write_text('{"id": 1}\n')
    job = world.new_job()

    assert world.run(job) == "committed"

    job.refresh_from_db()
    assert job.message.startswith("0 task(s), 0 record(s) delivered")
    assert "Nothing to read: the source listed no dataset" in job.message
