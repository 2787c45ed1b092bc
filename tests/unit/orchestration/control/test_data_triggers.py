"""Stories of flows started by data: an upstream flow's commit starts the flows waiting for its
datasets (any or all of them, after a debounce), files arriving in a source folder start a flow,
and what may not run (paused, no longer allowed to read) does not. Executions go through the real
orchestrator; the worker is played by `executor.claim` / `executor.report`."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from portal.flows.triggers import services as trigger_services
from portal.flows.triggers.models import FlowTrigger, UpstreamDataset
from portal.orchestration import services
from portal.orchestration.control import triggers
from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import Action, ActionKind, ExecutionStatus, FlowExecution, JobStatus
from portal.orchestration.state import statestore
from portal.orchestration.worker import executor
from portal.topology.models import DataNode, DataNodeGrant
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.topology.helpers import executor as make_executor
from tests.unit.topology.helpers import nodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def lake(db):
    """Data nodes a (a source), lake (where upstream flows publish) and mart, routed by x1."""
    nodes("a", "lake", "mart")
    make_executor("x1", "a>lake", "lake>mart", "a>mart")


def flow(owner, name: str, source: str = "a", destination: str = "lake", **fields):
    defaults = {"flow_group": "sales", "flow_name": name, "source": source, "destinations": [destination]}
    return FlowConfigFactory(owner=owner, schedule="", **{**defaults, **fields})


def commit(upstream, user, datasets: tuple[str, ...] = (), records: int = 1) -> FlowExecution:
    """Run the upstream flow through the orchestrator to COMMITTED, its worker checking in `datasets`."""
    execution = services.run_now(upstream, user=user)
    process_actions()
    for job in execution.jobs.order_by("hop_index"):
        for urn in datasets:
            statestore.check_in(
                flow_id=upstream.pk,
                flow_group=upstream.flow_group,
                flow_name=upstream.flow_name,
                job_name=job.job_name,
                dataset_urn=urn,
                watermark="1",
                execution_id=execution.execution_id,
                status="COMMITTED",
            )
        claimed = executor.claim(job.pk, job.attempt, "test-worker")
        assert claimed is not None
        executor.report(claimed, job.attempt, JobStatus.COMMITTED, processed_count=records)
        process_actions()
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.COMMITTED
    return execution


def data_runs(downstream) -> list[FlowExecution]:
    return list(FlowExecution.objects.filter(flow=downstream, trigger=FlowExecution.Trigger.DATA))


def test_an_upstream_commit_starts_the_flow_waiting_for_its_datasets(owner, lake):
    orders = flow(owner, "orders")
    report = flow(owner, "report", source="lake", destination="mart")
    trigger_services.save_settings(report, {"upstream": ["sales/orders"]})

    upstream_run = commit(orders, owner)

    (run,) = data_runs(report)
    assert run.requested_by == f"data: sales/orders#{upstream_run.execution_id} committed"
    assert Action.objects.filter(kind=ActionKind.LAUNCH, execution_id=run.execution_id).exists()
    # Its LAUNCH is due now: the loop's next claim (the same pass: it claims until none is due) launches it.
    process_actions()
    run.refresh_from_db()
    assert run.status == ExecutionStatus.COMPILED
    assert trigger_services.runs_when(report) == ["sales/orders commits"]
    assert [str(f) for f in trigger_services.feeds(orders)] == ["sales/report"]


def test_with_all_the_flow_waits_for_every_upstream_and_then_for_every_one_again(owner, lake):
    orders, customers = flow(owner, "orders"), flow(owner, "customers")
    report = flow(owner, "report", source="lake", destination="mart")
    trigger_services.save_settings(
        report, {"upstream": ["sales/orders", "sales/customers"], "upstream_mode": "all"}
    )

    commit(orders, owner)
    assert data_runs(report) == []
    commit(customers, owner)
    assert len(data_runs(report)) == 1
    # The commits were consumed: orders alone again is not enough.
    commit(orders, owner)
    assert len(data_runs(report)) == 1
    assert UpstreamDataset.objects.get(upstream=orders).committed_execution is not None
    assert UpstreamDataset.objects.get(upstream=customers).committed_execution is None


def test_with_any_each_upstream_commit_starts_a_run(owner, lake):
    orders, customers = flow(owner, "orders"), flow(owner, "customers")
    report = flow(owner, "report", source="lake", destination="mart")
    trigger_services.save_settings(report, {"upstream": ["sales/orders", "sales/customers"]})
    commit(orders, owner)
    commit(customers, owner)
    assert len(data_runs(report)) == 2


def test_a_debounce_starts_one_run_after_the_commits_go_quiet(owner, lake):
    orders = flow(owner, "orders")
    report = flow(owner, "report", source="lake", destination="mart")
    trigger_services.save_settings(report, {"upstream": ["sales/orders"], "debounce_seconds": 60})

    commit(orders, owner)
    commit(orders, owner)
    assert data_runs(report) == []
    due = FlowTrigger.objects.get(flow=report).fire_at
    assert due is not None and due > timezone.now() + timedelta(seconds=50)
    assert triggers.fire_due(timezone.now()) == 0  # not yet

    assert triggers.fire_due(due + timedelta(seconds=1)) == 1
    (run,) = data_runs(report)
    assert "debounced" in run.requested_by
    assert FlowTrigger.objects.get(flow=report).fire_at is None
    assert triggers.fire_due(due + timedelta(seconds=2)) == 0


def test_naming_one_dataset_waits_for_that_dataset_only(owner, lake):
    orders = flow(owner, "orders")
    report = flow(owner, "report", source="lake", destination="mart")
    trigger_services.save_settings(report, {"upstream": ["sales/orders/public.orders"]})

    commit(orders, owner, datasets=("public.customers",))
    assert data_runs(report) == []
    commit(orders, owner, datasets=("public.orders", "public.customers"))
    assert len(data_runs(report)) == 1


def test_a_paused_flow_is_not_started_by_data(owner, lake):
    orders = flow(owner, "orders")
    report = flow(owner, "report", source="lake", destination="mart", paused=True)
    trigger_services.save_settings(report, {"upstream": ["sales/orders"]})
    commit(orders, owner)
    assert data_runs(report) == []


def test_a_failed_upstream_starts_nothing(owner, lake):
    orders = flow(owner, "orders")
    report = flow(owner, "report", source="lake", destination="mart")
    trigger_services.save_settings(report, {"upstream": ["sales/orders"]})
    execution = services.run_now(orders, user=owner)
    process_actions()
    job = execution.jobs.get()
    claimed = executor.claim(job.pk, job.attempt, "test-worker")
    assert claimed is not None
    executor.report(claimed, job.attempt, JobStatus.FAILED, message="boom")
    process_actions()
    assert data_runs(report) == []


def test_a_user_may_wait_only_for_datasets_they_may_read(owner, lake, settings):
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"
    bob = UserFactory(username="bob")
    for name in ("a", "lake"):  # olivia's payroll flow reads a and publishes into lake
        DataNodeGrant.objects.create(node=DataNode.objects.get(name=name), user=owner, role="owner")
    secret = flow(owner, "payroll")
    report = flow(bob, "report", source="lake", destination="mart")
    with pytest.raises(ValidationError) as refused:
        trigger_services.save_settings(report, {"upstream": ["sales/payroll"]})
    (message,) = refused.value.message_dict["upstream"]
    assert "'bob' may not read sales/payroll's datasets" in message and "'lake'" in message
    assert not UpstreamDataset.objects.exists()

    # Allowed when saved, but the grant is revoked later: the commit starts nothing.
    grant = DataNodeGrant.objects.create(node=DataNode.objects.get(name="lake"), user=bob, role="read")
    trigger_services.save_settings(report, {"upstream": ["sales/payroll"]})
    grant.delete()
    commit(secret, owner)
    assert data_runs(report) == []


def test_files_arriving_in_the_source_folder_start_the_flow(owner, lake, tmp_path, settings):
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "old.csv").write_text("id\n1\n")
    DataNode.objects.filter(name="a").update(properties={"path": str(folder)})
    ingest = flow(owner, "ingest")
    trigger_services.save_settings(ingest, {"on_files": True})
    now = timezone.now()

    assert triggers.check_files(now) == 0  # the watch starts: old.csv was there already
    assert triggers.check_files(now + timedelta(seconds=60)) == 0
    new = folder / "2026-11-27.csv"
    new.write_text("id\n2\n")
    later = time.time() + 5
    os.utime(new, (later, later))
    assert triggers.check_files(now + timedelta(seconds=120)) == 1
    (run,) = FlowExecution.objects.filter(flow=ingest, trigger=FlowExecution.Trigger.FILES)
    assert run.requested_by == "files: new in a"
    assert triggers.check_files(now + timedelta(seconds=180)) == 0  # nothing new since


def test_a_watch_is_not_looked_at_before_it_is_due(owner, lake, tmp_path):
    DataNode.objects.filter(name="a").update(properties={"path": str(tmp_path)})
    ingest = flow(owner, "ingest")
    trigger_services.save_settings(ingest, {"on_files": True})
    now = timezone.now()
    triggers.check_files(now)
    (tmp_path / "x.csv").write_text("id\n")
    assert triggers.check_files(now + timedelta(seconds=1)) == 0  # due again only after the poll
    assert FlowTrigger.objects.get(flow=ingest).files_check_at > now


def test_the_settings_refuse_bad_input_field_by_field(owner, lake):
    nodes("pg", kind="jdbc")
    orders = flow(owner, "orders")
    report = flow(owner, "report", source="pg", destination="mart")
    trigger_services.save_settings(orders, {"upstream": ["sales/report"]})
    with pytest.raises(ValidationError) as refused:
        trigger_services.save_settings(
            report,
            {
                "upstream": ["sales/nope", "not-a-name", "sales/report", "sales/orders"],
                "upstream_mode": "most",
                "debounce_seconds": -1,
                "on_files": True,
                "freshness": "soonish",
            },
        )
    errors = refused.value.message_dict
    assert errors["upstream"] == [
        "sales/nope: no such flow.",
        "'not-a-name' is not <flowGroup>/<flowName> or <flowGroup>/<flowName>/<dataset>.",
        "sales/report: a flow cannot wait for its own datasets.",
        "sales/orders: sales/orders already waits (through its upstreams) for this flow: a cycle.",
    ]
    assert errors["upstream_mode"] == ["'most' is not one of: any, all."]
    assert errors["debounce_seconds"] == ["A whole number of seconds from 0 to 86400."]
    assert "'pg' is not a files data node" in errors["on_files"][0]
    assert errors["freshness"][0].startswith("Not a freshness goal: 'soonish'")
    assert not FlowTrigger.objects.filter(flow=report).exists()


def test_an_empty_upstream_commit_starts_the_flow_unless_it_asked_otherwise(owner, lake):
    orders = flow(owner, "orders")
    report = flow(owner, "report", source="lake", destination="mart")
    trigger_services.save_settings(report, {"upstream": ["sales/orders"]})
    commit(orders, owner, records=0)
    assert len(data_runs(report)) == 1  # by default every commit counts, an empty one too

    saved = trigger_services.save_settings(report, {"skip_empty": True})
    assert saved.skip_empty and "an empty commit does not count" in trigger_services.runs_when(report)[0]
    commit(orders, owner, records=0)
    assert len(data_runs(report)) == 1  # nothing delivered: not started
    commit(orders, owner, records=5)
    assert len(data_runs(report)) == 2
