"""The lineage of a two-hop fork, on the real stack: a CSV folder forked
into two formats on the first hop (landing → lake, the column rule dropping `ssn`), copied on
to the archive by the second hop, through a real scheduler, Celery worker and Spark. The worker
and the scheduler append their OpenLineage events to one file; each is checked with the
client's classes (tests/lineage_check.py), and the dataset page tells what feeds what."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from portal.flows import services as flow_services
from portal.orchestration import services
from portal.orchestration.models import DatasetState, ExecutionStatus, FlowExecution, LineageEdge
from tests.factories import UserFactory
from tests.integration.stack import process_env, wait_until
from tests.lineage_check import validated

pytestmark = pytest.mark.django_db(transaction=True)
User = get_user_model()


@pytest.fixture(scope="module")
def stack_env(django_db_setup, django_db_blocker, stack_dir, broker_url):
    """The stack's processes, told to append their lineage events to one file."""
    with django_db_blocker.unblock():
        return process_env(stack_dir / "var", broker_url, OPENLINEAGE_FILE=str(stack_dir / "lineage.jsonl"))


@pytest.fixture
def lake(lake: Path) -> Path:
    """The integration topology, with a CSV of people (one column the fork drops) in the landing."""
    people = lake / "landing" / "people"
    people.mkdir()
    (people / "a.csv").write_text("id,name,ssn\n1,ann,111-11\n2,bob,222-22\n")
    return lake


def events_of(path: Path, count: int) -> list[dict]:
    """The flow's events once `count` have arrived, each checked."""

    def read() -> list[dict]:
        lines = path.read_text().splitlines() if path.exists() else []
        return [e for e in map(validated, lines) if e["job"]["name"].startswith("it.people-forked.")]

    wait_until(lambda: len(read()) >= count, 60, f"{count} lineage events")
    return read()


def test_a_two_hop_fork_tells_each_hop_s_run_datasets_and_columns(lake, worker, scheduler, stack_dir):
    owner = User.objects.get_or_create(username="olivia", is_staff=True)[0]
    flow = flow_services.create_flow(
        owner=owner,
        data={
            "flow_group": "it",
            "flow_name": "people-forked",
            "schedule": "",
            "source": "landing",
            "destinations": ["archive"],
            "paused": True,
            "properties": {
                "source.class": "portal.pipeline.sources.files.FileSource",
                "source.files.format": "csv",
                "fork.branches": "2",
                "writer.output.format.0": "parquet",
                "writer.output.format.1": "csv",
                "columns.drop": "ssn",
            },
        },
    )
    flow = flow_services.set_paused(flow, False)
    execution = services.run_now(flow, user=owner)
    wait_until(
        lambda: FlowExecution.objects.get(pk=execution.pk).status in ("COMMITTED", "FAILED"), 300, "the run"
    )
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.COMMITTED, execution.message

    events = events_of(stack_dir / "lineage.jsonl", 4)
    first, second = sorted({e["job"]["name"] for e in events})  # it.people-forked.1-…, .2-…
    by_job = {name: [e for e in events if e["job"]["name"] == name] for name in (first, second)}
    for name, told in by_job.items():
        assert [e["eventType"] for e in told] == ["START", "COMPLETE"], name
        assert told[0]["run"]["runId"] == told[1]["run"]["runId"]
    ingest, copy = by_job[first][1], by_job[second][1]
    assert [(d["namespace"], d["name"]) for d in ingest["inputs"]] == [("file", str(lake / "landing"))]
    lake_folder = ("file", str(lake / "lake" / "it" / "people-forked"))
    # Both branches publish to the flow's one folder: one output, which the next hop reads.
    assert [(d["namespace"], d["name"]) for d in ingest["outputs"]] == [lake_folder]
    assert [(d["namespace"], d["name"]) for d in copy["inputs"]] == [lake_folder]
    assert [(d["namespace"], d["name"]) for d in copy["outputs"]] == [
        ("file", str(lake / "archive" / "it" / "people-forked"))
    ]

    read = [f["name"] for f in ingest["inputs"][0]["facets"]["schema"]["fields"]]
    assert read == ["id", "name", "ssn"]
    written = ingest["outputs"][0]["facets"]
    assert [f["name"] for f in written["schema"]["fields"]] == ["id", "name"]  # ssn dropped
    assert set(written["columnLineage"]["fields"]) == {"id", "name"}
    assert written["columnLineage"]["fields"]["name"]["inputFields"][0]["field"] == "name"
    # The second hop copies what the first delivered, column for column.
    copied = copy["outputs"][0]["facets"]["columnLineage"]["fields"]
    assert {c: f["inputFields"][0]["transformations"][0]["subtype"] for c, f in copied.items()} == {
        "id": "IDENTITY",
        "name": "IDENTITY",
    }

    edges = {(e.source_name, e.target_name) for e in LineageEdge.objects.filter(flow_name="people-forked")}
    assert edges == {
        (str(lake / "landing"), lake_folder[1]),
        (lake_folder[1], str(lake / "archive" / "it" / "people-forked")),
    }
    # The state page of the dataset the first hop reads tells what it feeds, hop by hop.
    state = DatasetState.objects.get(flow_name="people-forked", dataset_urn="people", job_name=first)
    browser = Client()
    browser.force_login(UserFactory(username="stella", is_staff=True))  # who reads the server's paths
    page = browser.get(f"/state/{state.pk}/").content.decode()
    delivered = page[page.index('data-test="delivered-to"') :]
    assert lake_folder[1] in delivered[: delivered.index("</ul>")]
    reads = page[page.index('data-test="feeds"') :]
    assert "people-forked" in reads[: reads.index("</ul>")]  # the second hop reads what it delivered
