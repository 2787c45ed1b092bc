"""Executions of flows. A FlowExecution is created once per due cron tick (or
run-now request) and is the row every later step hangs off."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db import models
from django.utils import timezone

from portal.accounts import access
from portal.flows.models import FlowConfig


class ExecutionStatus(models.TextChoices):
    PENDING = "PENDING"
    COMPILED = "COMPILED"
    RUNNING = "RUNNING"
    COMMITTED = "COMMITTED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    SKIPPED = "SKIPPED"


FINISHED_STATUSES = {
    ExecutionStatus.COMMITTED,
    ExecutionStatus.FAILED,
    ExecutionStatus.CANCELLED,
    ExecutionStatus.SKIPPED,
}


class ExecutionQuerySet(access.AccessQuerySet):
    """Executions, with the one rule for a tick written ahead of its time."""

    def upcoming(self, now: datetime | None = None) -> ExecutionQuerySet:
        """Ticks the scheduler wrote ahead (SCHEDULER_LOOKAHEAD_SECONDS) whose time
        has not come: PENDING, with a cron tick still in the future."""
        return self.filter(status=ExecutionStatus.PENDING, scheduled_at__gt=now or timezone.now())

    def arrived(self, now: datetime | None = None) -> ExecutionQuerySet:
        """Every execution but the upcoming ones."""
        return self.exclude(status=ExecutionStatus.PENDING, scheduled_at__gt=now or timezone.now())


ExecutionManager = models.Manager.from_queryset(ExecutionQuerySet)


class ArrivedExecutions(ExecutionManager):
    """The default manager: an execution written ahead of its tick does not exist
    for anyone until the tick comes — not for lists, pages, counts, /metrics,
    dashboards, the Gobblin APIs, quotas, monitors, retention or recovery. Only
    the scheduler and the orchestrator see it (FlowExecution.with_upcoming)."""

    def get_queryset(self) -> ExecutionQuerySet:
        return ExecutionQuerySet(self.model, using=self._db).arrived()


class FlowExecution(models.Model):
    class Trigger(models.TextChoices):
        SCHEDULE = "SCHEDULE", "cron tick"
        RUN_NOW = "RUN_NOW", "run now"
        RUN_IMMEDIATELY = "RUN_IMMEDIATELY", "run immediately on save"
        BACKFILL = "BACKFILL", "backfill"
        DATA = "DATA", "upstream data committed"
        FILES = "FILES", "files arrived"
        WEBHOOK = "WEBHOOK", "webhook"

    flow = models.ForeignKey(FlowConfig, on_delete=models.SET_NULL, null=True, related_name="executions")
    # Kept as text too, so history outlives a deleted flow.
    flow_group = models.CharField(max_length=128)
    flow_name = models.CharField(max_length=128)
    execution_id = models.BigIntegerField(help_text="Epoch milliseconds from the DB clock (flowExecutionId).")
    scheduled_at = models.DateTimeField(null=True, blank=True, help_text="The cron tick; empty for run-now.")
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    status = models.CharField(max_length=16, choices=ExecutionStatus.choices, default=ExecutionStatus.PENDING)
    message = models.TextField(blank=True)
    # When the execution came to be: for a tick written ahead, the tick (so ages, hourly
    # quotas and counts read it as an execution made when its tick came).
    created = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # The compiled job DAG as launched (CompiledFlow.to_dict()), so history
    # shows what ran even after the flow or topology changed.
    dag = models.JSONField(default=dict, blank=True)
    # {dataset_urn: {"low": ..., "high": ...}}: a backfill run; never moves
    # the stored watermark.
    backfill = models.JSONField(default=dict, blank=True)
    cancel_requested = models.BooleanField(default=False)
    requested_by = models.CharField(max_length=150, blank=True)
    # What it compiled against, recorded at launch: the flow's version
    # (flows.versions), each template pack's version, the topology revision,
    # and a hash of the job plan (two executions with one hash ran the same plan).
    # `pinned_version`: a re-run asked for this old version instead of the current one.
    pinned_version = models.PositiveIntegerField(null=True, blank=True)
    flow_version = models.PositiveIntegerField(null=True, blank=True)
    pack_versions = models.JSONField(default=dict, blank=True)
    topology_revision = models.BigIntegerField(null=True, blank=True)
    plan_hash = models.CharField(max_length=64, blank=True)

    # restrict(user, action): orchestration.rules. `objects` hides the ticks written ahead
    # (ArrivedExecutions); `with_upcoming` is every row, for the scheduler and orchestrator.
    objects = ArrivedExecutions()
    with_upcoming = ExecutionManager()

    class Meta:
        ordering = ["-execution_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["flow_group", "flow_name", "execution_id"], name="execution_id_per_flow"
            ),
            models.UniqueConstraint(
                fields=["flow", "scheduled_at"],
                condition=models.Q(scheduled_at__isnull=False),
                name="one_execution_per_tick",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "created"]),
            # The executions page and API list newest first, filtered by status
            # or not; the dashboard and retention look executions up by age.
            models.Index(fields=["-execution_id", "-id"], name="execution_newest"),
            models.Index(fields=["status", "-execution_id"], name="execution_status_newest"),
            # A flow's newest executions (its page, the flow list's last runs): read
            # a few from the top, however long its history.
            models.Index(fields=["flow", "-execution_id"], name="execution_flow_newest"),
            models.Index(fields=["created"], name="execution_created"),
            # The dashboard's recent failures. No NULLS LAST: SQLite (the embedded
            # database) cannot index it, and a finished execution has its end time.
            models.Index(
                models.F("status"),
                models.F("ended_at").desc(),
                models.F("id").desc(),
                name="execution_status_ended",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.flow_group}/{self.flow_name}#{self.execution_id}"

    @property
    def logical_date(self) -> datetime | None:
        """The moment the run is for (Airflow's logical date): its cron tick,
        or when it was asked for when run by hand or backfilled."""
        return self.scheduled_at or self.created

    @property
    def display_name(self) -> str:
        """A name a person can read and say ("orders-daily · 2026-11-26 02:00"),
        shown beside the epoch-millisecond id, which stays the key."""
        moment = self.logical_date
        if moment is None:
            return self.flow_name
        return f"{self.flow_name} · {timezone.localtime(moment):%Y-%m-%d %H:%M}"


class ScheduleCursor(models.Model):
    """The last tick the schedulers have turned into an execution, per flow.
    Any scheduler may advance it; row locks keep two from doing it at once."""

    flow = models.OneToOneField(FlowConfig, on_delete=models.CASCADE, related_name="schedule_cursor")
    schedule = models.CharField(max_length=200)
    # Null until a scheduler first sees the flow: it starts counting from then.
    last_tick = models.DateTimeField(null=True, blank=True)
    # The next tick after last_tick (null: to be worked out, e.g. for a new
    # flow or after its schedule changed). Indexed: a pass reads only the due
    # cursors, not every scheduled flow.
    next_tick = models.DateTimeField(null=True, blank=True, db_index=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # The cursors to work out, read by every pass: a btree skips NULLs for a planner
            # whose statistics say many, so without this each pass read every cursor.
            models.Index(
                fields=["flow"], condition=models.Q(next_tick__isnull=True), name="cursor_to_work_out"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.flow} at {self.last_tick:%Y-%m-%d %H:%M}" if self.last_tick else f"{self.flow} (new)"


class JobStatus(models.TextChoices):
    PENDING = "PENDING"  # waiting for its parents (or for a retry's backoff)
    ORCHESTRATED = "ORCHESTRATED"  # sent to the executor's queue
    RUNNING = "RUNNING"
    COMMITTED = "COMMITTED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    SKIPPED = "SKIPPED"


# Within one attempt a job's status only moves up this rank, so a late or
# duplicated update can never move it backwards.
JOB_STATUS_RANK: dict[str, int] = {
    JobStatus.PENDING: 0,
    JobStatus.ORCHESTRATED: 1,
    JobStatus.RUNNING: 2,
    JobStatus.COMMITTED: 3,
    JobStatus.FAILED: 3,
    JobStatus.CANCELLED: 3,
    JobStatus.SKIPPED: 3,
}
JOB_FINISHED = {JobStatus.COMMITTED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.SKIPPED}
# A job that ended without committing: its children are skipped, and RESUME runs it again.
JOB_NOT_COMMITTED = {JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.SKIPPED}
RESUMABLE_STATUSES = {ExecutionStatus.FAILED, ExecutionStatus.CANCELLED}


class JobExecution(models.Model):
    """One job of an execution's DAG: GaaS's JobStatus, plus what the
    orchestrator needs to dispatch, deduplicate and retry it."""

    execution = models.ForeignKey(FlowExecution, on_delete=models.CASCADE, related_name="jobs")
    job_name = models.CharField(max_length=300)
    job_group = models.CharField(max_length=128)
    hop_index = models.PositiveIntegerField(default=1)
    executor = models.CharField(max_length=128)
    queue = models.CharField(max_length=200)
    spark_master = models.CharField(max_length=300, blank=True)
    parents = models.JSONField(default=list, blank=True)
    # The JobSpec as sent (encrypted values stay ciphertext).
    spec = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.PENDING)
    status_rank = models.PositiveSmallIntegerField(default=0)
    # Every dispatch (a retry or a redelivery after a dead worker) is a new
    # attempt; `retries` counts only failures against job.retry.count.
    attempt = models.PositiveIntegerField(default=0)
    retries = models.PositiveIntegerField(default=0)
    max_retries = models.PositiveIntegerField(default=0)
    # Attempts started again because their worker stopped heartbeating without
    # reporting; past JOB_MAX_REDELIVERIES the job fails as a poison job.
    redeliveries = models.PositiveIntegerField(default=0)
    not_before = models.DateTimeField(null=True, blank=True)
    # Ready, but held back by a quota since then (portal.orchestration.control.quota_gate);
    # empty once it leaves PENDING. Its executor's waiters are read by an index.
    waiting_since = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    message = models.TextField(blank=True)
    # While the job runs: rows read so far. Once it finished: rows delivered (published by the
    # commit), with the rows read and rejected beside it; high_watermark is the committed one.
    processed_count = models.BigIntegerField(default=0)
    records_read = models.BigIntegerField(default=0)
    records_rejected = models.BigIntegerField(default=0)
    low_watermark = models.TextField(blank=True)
    high_watermark = models.TextField(blank=True)
    spark_ui_url = models.CharField(max_length=300, blank=True)
    progress = models.JSONField(default=dict, blank=True)
    task_states = models.JSONField(default=list, blank=True)
    log_excerpt = models.TextField(blank=True)
    driver_log_excerpt = models.TextField(blank=True)

    class Meta:
        ordering = ["execution_id", "hop_index", "job_name"]
        constraints = [
            models.UniqueConstraint(fields=["execution", "job_name"], name="one_job_per_execution")
        ]
        indexes = [
            models.Index(fields=["status", "lease_until"]),
            models.Index(
                fields=["executor", "waiting_since"],
                condition=models.Q(waiting_since__isnull=False),
                name="job_waiting_for_quota",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_name}#{self.execution.execution_id}"

    @property
    def records_bad(self) -> int:
        """Records its tasks could not read and set aside (portal.pipeline.badrows)."""
        return sum(int(state.get("records_bad") or 0) for state in self.task_states or [])

    @property
    def bad_records_tables(self) -> list[str]:
        """The error tables beside its JDBC or Iceberg destinations its tasks' bad records go to
        with the run's publish (portal.pipeline.destinations.badtables)."""
        names = (name for state in self.task_states or [] for name in state.get("bad_records_tables") or [])
        return list(dict.fromkeys(names))

    @property
    def bad_records_in_files(self) -> bool:
        """Whether some of them are in files (beside a files dataset, or the err folder)."""
        return any(state.get("bad_records_files") for state in self.task_states or [])


class ActionKind(models.TextChoices):
    LAUNCH = "LAUNCH"
    KILL = "KILL"
    RESUME = "RESUME"
    REEVALUATE = "REEVALUATE"
    ENFORCE_JOB_START_DEADLINE = "ENFORCE_JOB_START_DEADLINE"
    ENFORCE_FLOW_FINISH_DEADLINE = "ENFORCE_FLOW_FINISH_DEADLINE"


class Action(models.Model):
    """A request to the orchestrator, as a row. The API and the scheduler
    insert them; any portal process claims one (a lease that expires, so a
    dead process's claim is retaken) and handles it idempotently."""

    flow_group = models.CharField(max_length=128)
    flow_name = models.CharField(max_length=128)
    execution_id = models.BigIntegerField()
    job_name = models.CharField(max_length=300, blank=True, default="")
    kind = models.CharField(max_length=32, choices=ActionKind.choices)
    payload = models.JSONField(default=dict, blank=True)
    due_at = models.DateTimeField()
    created = models.DateTimeField(auto_now_add=True)
    claimed_by = models.CharField(max_length=200, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    done_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["due_at", "id"]
        constraints = [
            # The same request, not yet picked up, is one row; once claimed,
            # a new one may queue behind it so no event is lost.
            models.UniqueConstraint(
                fields=["flow_group", "flow_name", "execution_id", "job_name", "kind"],
                condition=models.Q(done_at__isnull=True, claimed_by=""),
                name="one_waiting_action_per_key",
            )
        ]
        indexes = [models.Index(fields=["done_at", "due_at"])]

    def __str__(self) -> str:
        job = f"/{self.job_name}" if self.job_name else ""
        return f"{self.kind} {self.flow_group}/{self.flow_name}#{self.execution_id}{job}"


class OutboxMessage(models.Model):
    """A Celery message written in the same transaction as the rows it is
    about; the relay sends it and marks it sent, so a broker outage delays
    dispatch but loses nothing."""

    queue = models.CharField(max_length=200)
    task_name = models.CharField(max_length=200)
    kwargs = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["sent_at", "id"])]

    def __str__(self) -> str:
        return f"{self.task_name} -> {self.queue}"


class WorkerHeartbeat(models.Model):
    """The last sign of life of a SpecExecutor worker process."""

    worker = models.CharField(max_length=200, unique=True)
    executors = models.JSONField(default=list)
    queues = models.JSONField(default=list)
    running_jobs = models.PositiveIntegerField(default=0)
    # Its capacity at the last beat (orchestration.worker.capacity): reading the
    # broker or not, job threads, the free ones, and what is wrong if anything.
    consuming = models.BooleanField(default=False)
    concurrency = models.PositiveIntegerField(default=0)
    free_slots = models.PositiveIntegerField(default=0)
    stuck_slots = models.PositiveIntegerField(default=0)  # threads gone or wedged
    problems = models.TextField(blank=True)
    started = models.DateTimeField()
    last_seen = models.DateTimeField()

    def __str__(self) -> str:
        return self.worker


class DatasetState(models.Model):
    """The state store: the watermark a dataset's last committed run checked
    in, per (flow, job, dataset.urn), so each hop and each dataset continues
    where it stopped even when a run skipped it. Watermarks are TEXT: a
    look-back window can be a sizeable JSON document."""

    # The FlowConfig that made it (its id, not a foreign key: the state and
    # its history outlive the flow for staff, and a flow re-created under the
    # same name gets a new id, so it starts fresh unless it adopts this).
    flow_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    owner_id = models.BigIntegerField(null=True, blank=True)  # that flow's owner (a user id), for adoption
    flow_group = models.CharField(max_length=128)
    flow_name = models.CharField(max_length=128)
    job_name = models.CharField(max_length=300)
    dataset_urn = models.CharField(max_length=500)
    watermark = models.TextField(blank=True)
    source_schema = models.TextField(blank=True)
    last_status = models.CharField(max_length=16, blank=True)
    execution_id = models.BigIntegerField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["flow_group", "flow_name", "job_name", "dataset_urn"]
        constraints = [
            models.UniqueConstraint(
                fields=["flow_id", "flow_group", "flow_name", "job_name", "dataset_urn"],
                name="one_state_per_flow_dataset",
            )
        ]

    def __str__(self) -> str:
        return f"{self.flow_group}/{self.flow_name} {self.dataset_urn}"


class DatasetStateHistory(models.Model):
    """One row per committed run (or admin reset) of a dataset."""

    state = models.ForeignKey(DatasetState, on_delete=models.CASCADE, related_name="history")
    execution_id = models.BigIntegerField(null=True, blank=True)
    previous_watermark = models.TextField(blank=True)
    watermark = models.TextField(blank=True)
    status = models.CharField(max_length=16)
    records = models.BigIntegerField(default=0)
    # The schema the run delivered (Spark's JSON), the history of schema.evolution.policy.
    source_schema = models.TextField(blank=True)
    reason = models.TextField(blank=True)
    changed_by = models.CharField(max_length=150, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["state", "-created", "-id"], name="watermark_history_newest")]

    def __str__(self) -> str:
        return f"{self.state} -> {self.watermark[:40]}"


# --- exactly-once: the commit-step store and the JobState of each run -----------------


class CommitStore(models.Model):
    """A named CommitStepStore (`storeName` in Gobblin's exactly-once design): one per
    job of a flow, `<flow_group>/<flow_name>/<job_name>#<flow id>`. The id
    keeps a deleted flow's unfinished steps its own: a flow re-created under
    the same name never finishes (publishes) them."""

    name = models.CharField(max_length=600, unique=True)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def name_for(flow_group: str, flow_name: str, job_name: str, flow_id: int | None) -> str:
        name = f"{flow_group}/{flow_name}/{job_name}"
        return name if flow_id is None else f"{name}#{flow_id}"


class CommitStoreDataset(models.Model):
    """The CommitSteps of one dataset URN that a run wrote before publishing
    and has not finished yet. The row exists only between "steps written"
    and "steps done"; a run finding one recovers it before pulling new data."""

    store = models.ForeignKey(CommitStore, on_delete=models.CASCADE, related_name="datasets")
    dataset_urn = models.CharField(max_length=500)
    # Who wrote the steps (so recovery can clean that run's task output).
    execution_id = models.BigIntegerField(null=True, blank=True)
    attempt = models.PositiveIntegerField(default=0)
    job_name = models.CharField(max_length=300, blank=True)
    work_dir = models.CharField(max_length=1000, blank=True)
    written_at = models.DateTimeField(auto_now_add=True)
    # Recovery bookkeeping: failed redos so far, the last error, when.
    redo_failures = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    last_redo_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["store", "dataset_urn"]
        constraints = [
            models.UniqueConstraint(fields=["store", "dataset_urn"], name="one_commit_sequence_per_dataset")
        ]

    def __str__(self) -> str:
        return f"{self.store.name} {self.dataset_urn}"


class CommitStepRecord(models.Model):
    """One CommitStep (its JSON form, secrets by property name only)."""

    dataset = models.ForeignKey(CommitStoreDataset, on_delete=models.CASCADE, related_name="steps")
    position = models.PositiveIntegerField()
    step = models.JSONField()

    class Meta:
        ordering = ["dataset", "position"]
        constraints = [models.UniqueConstraint(fields=["dataset", "position"], name="one_step_per_position")]

    def __str__(self) -> str:
        return f"{self.dataset} #{self.position} {self.step.get('type', '?')}"


class TryCause(models.TextChoices):
    """Why a try (an attempt) of a job began."""

    FIRST = "", "first try"
    RETRY = "RETRY", "retry after a failure"
    REDELIVERY = "REDELIVERY", "redelivered: its worker stopped"
    RESUME = "RESUME", "resumed by hand"


class JobState(models.Model):
    """Gobblin's JobState of one run (one attempt of a JobExecution): when
    it ran, where, how it ended, and what became of each dataset — committed,
    recovered from an earlier run's leftover steps, or skipped. The attempt
    of a worker that died is ended FAILED by the sweep that redelivers it."""

    job = models.ForeignKey(JobExecution, on_delete=models.CASCADE, related_name="run_states")
    attempt = models.PositiveIntegerField()
    # Why this try began (orchestration.state.tries): the tries of a job are its history.
    cause = models.CharField(max_length=16, choices=TryCause.choices, blank=True, default=TryCause.FIRST)
    worker = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.RUNNING)
    message = models.TextField(blank=True)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    # {urn: {"status", "steps", "executed", "watermark", "message"}}
    datasets = models.JSONField(default=dict, blank=True)
    # {urn: {"execution_id", "steps", "executed", "status", "message"}}
    recovered = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["job", "attempt"]
        constraints = [models.UniqueConstraint(fields=["job", "attempt"], name="one_job_state_per_attempt")]

    def __str__(self) -> str:
        return f"{self.job} attempt {self.attempt}: {self.status}"


def delivered(jobs: Iterable[JobExecution]) -> dict[str, int]:
    """Records each destination received, by destination node: the counts of
    the final hops (jobs no other job waits for). An intermediate hop's
    records are on their way, so a two-hop flow of 3 M rows delivered 3 M,
    not 6 M."""
    received: dict[str, int] = {}
    for job in final_hops(jobs):
        if job.status != JobStatus.COMMITTED:
            continue  # its records did not arrive
        node = (job.spec.get("properties") or {}).get("flowport.hop.destination") or job.job_name
        received[node] = received.get(node, 0) + job.processed_count
    return received


def final_hops(jobs: Iterable[JobExecution]) -> list[JobExecution]:
    """The jobs no other job of the same execution waits for: they deliver."""
    jobs = list(jobs)
    waited_for = {parent for job in jobs for parent in job.parents}
    return [job for job in jobs if job.job_name not in waited_for]


def delivered_text(received: dict[str, int]) -> str:
    """ "3,000,000 record(s) to archive" (and more, joined), for messages."""
    parts = [f"{count:,} record(s) to {node}" for node, count in sorted(received.items())]
    return " and ".join(parts) if parts else "no records"


class LineageEdge(models.Model):
    """A dataset read and a dataset written by one job of a flow, as its last committed run
    told (orchestration.state.lineage): the dataset pages say from these what feeds a dataset and
    what it feeds. Datasets are OpenLineage's (namespace, name), never with credentials."""

    source_namespace = models.CharField(max_length=300)
    source_name = models.CharField(max_length=500)
    target_namespace = models.CharField(max_length=300)
    target_name = models.CharField(max_length=500)
    flow_group = models.CharField(max_length=128)
    flow_name = models.CharField(max_length=128)
    job_name = models.CharField(max_length=300)
    execution_id = models.BigIntegerField()
    seen = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "source_namespace",
                    "source_name",
                    "target_namespace",
                    "target_name",
                    "flow_group",
                    "flow_name",
                    "job_name",
                ],
                name="lineage_edge_once_per_job",
            )
        ]
        indexes = [
            models.Index(fields=["target_namespace", "target_name"], name="lineage_edge_into"),
            models.Index(fields=["source_namespace", "source_name"], name="lineage_edge_out_of"),
        ]

    def __str__(self) -> str:
        return f"{self.source_namespace}/{self.source_name} → {self.target_namespace}/{self.target_name}"
