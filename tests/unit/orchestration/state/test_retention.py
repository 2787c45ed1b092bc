"""History retention: old finished history is pruned in batches; watermarks,
their recent history and unfinished commit steps never are."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from portal.events.models import Event
from portal.flows.policies import validate
from portal.orchestration.models import (
    CommitStepRecord,
    CommitStore,
    CommitStoreDataset,
    DatasetState,
    DatasetStateHistory,
    ExecutionStatus,
    FlowExecution,
    JobExecution,
    JobState,
    OutboxMessage,
)
from portal.orchestration.state import joblogs
from portal.orchestration.state.retention import prune_history, prune_once
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory

pytestmark = pytest.mark.django_db


def days_ago(n: int):
    return timezone.now() - timedelta(days=n)


def execution(flow, status: str, age_days: int) -> FlowExecution:
    made = FlowExecutionFactory(flow=flow, status=status)
    FlowExecution.objects.filter(pk=made.pk).update(created=days_ago(age_days))
    return made


@pytest.fixture
def log_dir(settings, tmp_path):
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
    return tmp_path / "logs"


def test_old_finished_history_is_pruned_and_recent_or_unfinished_is_kept(owner, log_dir):
    flow = FlowConfigFactory(owner=owner)
    old = execution(flow, ExecutionStatus.COMMITTED, 200)
    job = JobExecutionFactory(execution=old, status="COMMITTED", attempt=2)
    for attempt in (1, 2):
        path = joblogs.log_path(old.execution_id, job.job_name, attempt)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("a log line\n")
    recent = execution(flow, ExecutionStatus.COMMITTED, 10)
    still_running = execution(flow, ExecutionStatus.RUNNING, 200)
    old_event = Event.objects.create(
        kind="sla.flow_finish_missed", message="late", flow_group=flow.flow_group
    )
    Event.objects.filter(pk=old_event.pk).update(created=days_ago(120))
    new_event = Event.objects.create(kind="sla.flow_finish_missed", message="late again")
    sent = OutboxMessage.objects.create(queue="q", task_name="t", sent_at=days_ago(100))
    unsent = OutboxMessage.objects.create(queue="q", task_name="t")
    OutboxMessage.objects.filter(pk=unsent.pk).update(created=days_ago(100))

    report = prune_history()

    assert set(FlowExecution.objects.values_list("pk", flat=True)) == {recent.pk, still_running.pk}
    assert not JobExecution.objects.filter(pk=job.pk).exists()
    assert report.executions == 1 and report.log_files == 2
    assert not (log_dir / "jobs" / str(old.execution_id)).exists()
    assert list(Event.objects.values_list("pk", flat=True)) == [new_event.pk]
    assert list(OutboxMessage.objects.values_list("pk", flat=True)) == [unsent.pk]
    assert sent.pk not in set(OutboxMessage.objects.values_list("pk", flat=True))
    assert prune_once().total == 0  # idempotent: nothing left to do


def test_retention_never_deletes_a_watermark_or_an_unfinished_commit_step(owner, log_dir):
    flow = FlowConfigFactory(owner=owner)
    state = DatasetState.objects.create(
        flow_group=flow.flow_group,
        flow_name=flow.flow_name,
        job_name="j",
        dataset_urn="orders",
        watermark="42",
    )
    ancient = DatasetStateHistory.objects.create(state=state, watermark="10", status="COMMITTED")
    older = DatasetStateHistory.objects.create(state=state, watermark="42", status="COMMITTED")
    within = DatasetStateHistory.objects.create(state=state, watermark="42", status="SKIPPED")
    DatasetStateHistory.objects.filter(pk=ancient.pk).update(created=days_ago(300))
    DatasetStateHistory.objects.filter(pk=older.pk).update(created=days_ago(200))
    DatasetStateHistory.objects.filter(pk=within.pk).update(created=days_ago(5))
    other = DatasetState.objects.create(
        flow_group=flow.flow_group,
        flow_name=flow.flow_name,
        job_name="j",
        dataset_urn="customers",
        watermark="7",
    )
    only = DatasetStateHistory.objects.create(state=other, watermark="7", status="COMMITTED")
    DatasetStateHistory.objects.filter(pk=only.pk).update(created=days_ago(400))
    # An old failed execution whose commit steps never finished.
    failed = execution(flow, ExecutionStatus.FAILED, 200)
    store = CommitStore.objects.create(name=f"{flow.flow_group}.{flow.flow_name}.j")
    pending = CommitStoreDataset.objects.create(
        store=store, dataset_urn="orders", execution_id=failed.execution_id
    )
    step = CommitStepRecord.objects.create(dataset=pending, position=0, step={"type": "publish"})

    prune_history()

    assert DatasetState.objects.filter(pk__in=[state.pk, other.pk]).count() == 2
    assert DatasetState.objects.get(pk=state.pk).watermark == "42"
    assert set(DatasetStateHistory.objects.values_list("pk", flat=True)) == {within.pk, only.pk}
    assert CommitStoreDataset.objects.filter(pk=pending.pk).exists()
    assert CommitStepRecord.objects.filter(pk=step.pk).exists()
    assert FlowExecution.objects.filter(pk=failed.pk).exists()  # still needed to redo its commit


def test_a_flow_can_keep_its_history_longer_or_shorter(owner, log_dir, settings):
    settings.HISTORY_RETENTION_DAYS = 90
    keeps_a_year = FlowConfigFactory(owner=owner, properties={"flow.retentionDays": "365"})
    keeps_a_week = FlowConfigFactory(owner=owner, properties={"flow.retentionDays": "7"})
    default = FlowConfigFactory(owner=owner)
    year_old = execution(keeps_a_year, ExecutionStatus.COMMITTED, 200)
    week_old = execution(keeps_a_week, ExecutionStatus.COMMITTED, 10)
    month_old = execution(default, ExecutionStatus.COMMITTED, 30)
    too_old = execution(default, ExecutionStatus.COMMITTED, 91)

    prune_history()

    assert set(FlowExecution.objects.values_list("pk", flat=True)) == {year_old.pk, month_old.pk}
    assert not FlowExecution.objects.filter(pk__in=[week_old.pk, too_old.pk]).exists()


def test_prunes_in_small_batches(owner, log_dir):
    flow = FlowConfigFactory(owner=owner)
    for _ in range(5):
        execution(flow, ExecutionStatus.COMMITTED, 100)

    assert prune_once(limit=2).executions == 2
    assert FlowExecution.objects.count() == 3


def test_a_bad_retention_property_is_refused_naming_it():
    with pytest.raises(ValidationError) as error:
        validate({"flow.retentionDays": "forever"})
    assert "flow.retentionDays" in error.value.message_dict


def test_a_pruned_job_takes_its_attempt_states_with_it(owner, log_dir):
    flow = FlowConfigFactory(owner=owner)
    old = execution(flow, ExecutionStatus.FAILED, 200)
    job = JobExecutionFactory(execution=old, status="FAILED")
    JobState.objects.create(job=job, attempt=1, status="FAILED", started_at=days_ago(200))
    kept = JobExecutionFactory(execution=execution(flow, ExecutionStatus.FAILED, 10), status="FAILED")
    JobState.objects.create(job=kept, attempt=1, status="FAILED", started_at=days_ago(10))

    assert prune_history().jobs == 1
    assert list(JobState.objects.values_list("job_id", flat=True)) == [kept.pk]


def test_retention_deletes_every_table_that_refers_to_an_execution():
    """Retention deletes an execution's rows table by table, without Django's
    cascade (bulk.delete_rows): a new table referring to executions or jobs
    must be added to retention._prune_executions, or its rows would stop the delete."""

    def referring(model) -> set[tuple[str, str]]:
        return {(rel.related_model.__name__, rel.field.name) for rel in model._meta.related_objects}

    assert referring(FlowExecution) == {("JobExecution", "execution")}
    assert referring(JobExecution) == {("JobState", "job")}
    assert referring(JobState) == set()
