"""What a backfill of an appending files dataset replaces: the loads it re-reads, found in the
dataset's history, widened to whole loads, and the files their committed jobs published."""

from __future__ import annotations

import pytest

from portal.orchestration.control import replays
from portal.orchestration.models import FlowExecution, JobExecution, JobStatus
from portal.orchestration.state import statestore

pytestmark = pytest.mark.django_db

GROUP, NAME, JOB, URN = "shop", "orders", "drop-to-lake", "orders"


def _load(execution_id: int, low: str, high: str, files: list[str], backfill: dict | None = None) -> None:
    """A committed execution that loaded (low, high] of orders and published `files`."""
    execution = FlowExecution.objects.create(
        flow_group=GROUP,
        flow_name=NAME,
        execution_id=execution_id,
        status="COMMITTED",
        backfill=backfill or {},
    )
    base = f"/work/shop/orders/{JOB}/{execution_id}/task/branch_0"
    JobExecution.objects.create(
        execution=execution,
        job_name=JOB,
        job_group=GROUP,
        status=JobStatus.COMMITTED,
        spec={"backfill": backfill} if backfill else {},
        task_states=[
            {
                "dataset_urn": URN,
                "branches": [
                    {"index": 0, "output_dir": base, "output_files": [{"path": f"{base}/{f}"} for f in files]}
                ],
            }
        ],
    )
    if not backfill:
        statestore.check_in(
            flow_group=GROUP, flow_name=NAME, job_name=JOB, dataset_urn=URN, watermark=high,
            execution_id=execution_id, status="COMMITTED",
        )  # fmt: skip


def test_a_backfill_replaces_the_files_of_the_whole_loads_it_reads_again() -> None:
    _load(1, "", "10", ["a.parquet"])
    _load(2, "10", "20", ["b.parquet", "c.parquet"])
    _load(3, "20", "30", ["d.parquet"])
    # A high inside the second load is moved to its end; the first and third are left alone.
    assert replays.whole_loads(GROUP, NAME, JOB, URN, "10", "15") == ("10", "20")
    assert replays.whole_loads(GROUP, NAME, JOB, URN, "5", "20") == (None, "20")
    names = [f["relative"] for f in replays.published_by(GROUP, NAME, JOB, URN, "10", "20")]
    assert names == ["b.parquet", "c.parquet"]
    # A backfill of (10, 20] published its own files; the next one over that range replaces them
    # too (the originals are gone, naming them again costs nothing).
    _load(4, "", "", ["e.parquet"], backfill={URN: {"low": "10", "high": "20"}})
    names = [f["relative"] for f in replays.published_by(GROUP, NAME, JOB, URN, "10", "30")]
    assert sorted(names) == ["b.parquet", "c.parquet", "d.parquet", "e.parquet"]


def test_re_running_an_execution_reads_exactly_its_ranges() -> None:
    _load(1, "", "10", ["a.parquet"])
    _load(2, "10", "20", ["b.parquet"])
    assert replays.loads_of(FlowExecution.objects.get(execution_id=2)) == {URN: {"low": "10", "high": "20"}}
    assert replays.loads_of(FlowExecution.objects.get(execution_id=1)) == {URN: {"low": None, "high": "10"}}
    _load(3, "", "", ["c.parquet"], backfill={URN: {"low": "5", "high": "12"}})
    assert replays.loads_of(FlowExecution.objects.get(execution_id=3)) == {URN: {"low": "5", "high": "12"}}
    # Bounds of another kind than the watermarks' (a slip) are kept apart, not a crash.
    assert replays.whole_loads(GROUP, NAME, JOB, URN, None, "2024-01-01T00:00:00Z") == (
        None,
        "2024-01-01T00:00:00Z",
    )


def test_the_execution_page_re_reads_what_a_committed_execution_loaded() -> None:
    """Its owner picks 'reading again exactly what it loaded' under Run this again: the new
    execution is a backfill of that execution's ranges, so its destinations replace them."""
    from django.test import Client

    from portal.flows import services as flows
    from portal.orchestration import services
    from portal.orchestration.control.actions import process_actions
    from tests.factories import UserFactory
    from tests.unit.topology.helpers import executor, nodes

    nodes("drop", "lake")
    executor("x1", "drop>lake")
    owner = UserFactory(username="olivia")
    flow = flows.create_flow(
        owner=owner,
        data={"flow_group": GROUP, "flow_name": NAME, "source": "drop", "destinations": ["lake"], "schedule": "0 3 * * *",
              "properties": {"source.files.format": "csv"}},
    )  # fmt: skip
    first = services.run_now(flow, user=owner)
    process_actions()
    job = JobExecution.objects.get(execution=first)
    FlowExecution.objects.filter(pk=first.pk).update(status="COMMITTED")
    statestore.check_in(
        flow_group=GROUP, flow_name=NAME, job_name=job.job_name, dataset_urn=URN, watermark="20",
        execution_id=first.execution_id, status="COMMITTED",
    )  # fmt: skip

    browser = Client()
    browser.force_login(owner)
    page = browser.get(f"/executions/{GROUP}/{NAME}/{first.execution_id}/").content.decode()
    assert 'value="replay"' in page
    answer = browser.post(
        f"/executions/{GROUP}/{NAME}/{first.execution_id}/rerun/", {"version": "replay"}, follow=True
    )
    again = FlowExecution.objects.exclude(pk=first.pk).get()
    assert again.backfill == {URN: {"low": None, "high": "20"}}
    assert "replace those rows instead of adding them" in answer.content.decode()


def test_an_execution_whose_flow_is_gone_is_not_re_read() -> None:
    from portal.orchestration.services import NotAllowedNow

    _load(1, "", "10", ["a.parquet"])
    orphan = FlowExecution.objects.get(execution_id=1)  # its flow was deleted: no flow row
    with pytest.raises(NotAllowedNow, match="Only a committed execution of an existing flow"):
        replays.replay(orphan, user=None)
