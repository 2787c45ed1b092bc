"""The state store: each dataset's watermark per (flow, job, dataset.urn),
with a history row per committed run. Previous watermarks come from here by
URN, so a dataset a run skipped keeps its watermark; the `high_watermark`
commit step writes here, verified like every other step.

State belongs to the FlowConfig that made it (by id): a flow deleted and
re-created under the same group/name starts fresh, whoever re-creates it;
the old rows stay for staff, and the new flow's owner may `adopt_state`
them when they are their own: a re-created flow starts fresh.

Also here: a skipped dataset's status row (`record_skip`), the admins'
audited watermark reset (`reset_watermark`), and the JobState of each run
(one `JobState` row per attempt: `start_job_state` / `finish_job_state`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from portal.accounts import access
from portal.accounts.access import Principal
from portal.flows.models import FlowConfig
from portal.orchestration.models import (
    CommitStore,
    CommitStoreDataset,
    DatasetState,
    DatasetStateHistory,
    JobExecution,
    JobState,
    JobStatus,
)
from portal.pipeline.destinations.commit_steps import CommitStep, register_step_type
from portal.pipeline.schema import drift as schemadrift


def flow_id_for(flow_id: int | None, flow_group: str, flow_name: str) -> int | None:
    """The flow a JobSpec or commit step belongs to. Those written before
    state was kept per flow carry no id: the flow of that name now."""
    if flow_id is not None:
        return int(flow_id)
    return (
        FlowConfig.objects.filter(flow_group=flow_group, flow_name=flow_name)
        .values_list("pk", flat=True)
        .first()
    )


def _locked_state(
    flow_id: int | None, flow_group: str, flow_name: str, job_name: str, dataset_urn: str
) -> DatasetState:
    """The dataset's state row, locked until the caller's transaction ends (made on first sight)."""
    state, _ = DatasetState.objects.select_for_update().get_or_create(
        flow_id=flow_id,
        flow_group=flow_group,
        flow_name=flow_name,
        job_name=job_name,
        dataset_urn=dataset_urn,
        # Django calls a callable default only when it creates the row; django-stubs lacks that.
        defaults={"owner_id": lambda: _owner_of(flow_id)},  # type: ignore[misc]  # see above
    )
    return state


def _owner_of(flow_id: int | None) -> int | None:
    if flow_id is None:  # no such flow (filter(pk=None) would match nothing too)
        return None
    return FlowConfig.objects.filter(pk=flow_id).values_list("owner_id", flat=True).first()


def previous_state(
    flow_group: str, flow_name: str, job_name: str, flow_id: int | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """(watermarks, source schemas) by dataset URN, for the JobSpec: the
    flow's own state only (none for a flow that has none, whatever an
    earlier flow of the same name left)."""
    watermarks: dict[str, str] = {}
    schemas: dict[str, str] = {}
    flow_id = flow_id_for(flow_id, flow_group, flow_name)
    # No flow (only outside a real run): the rows checked in without one.
    rows = DatasetState.objects.filter(
        flow_id=flow_id, flow_group=flow_group, flow_name=flow_name, job_name=job_name
    )
    if flow_id is None:
        rows = DatasetState.objects.filter(
            flow_id__isnull=True, flow_group=flow_group, flow_name=flow_name, job_name=job_name
        )
    for state in rows.only("dataset_urn", "watermark", "source_schema"):
        if state.watermark:
            watermarks[state.dataset_urn] = state.watermark
        if state.source_schema:
            schemas[state.dataset_urn] = state.source_schema
    return watermarks, schemas


def delivered_by(
    execution_id: int | None, flow_group: str, flow_name: str, job_name: str, flow_id: int | None = None
) -> dict[str, str]:
    """The watermarks, by dataset URN, that this execution already checked in (an earlier attempt of
    it committed them, or this attempt's recovery finished that attempt's steps). The execution is
    done with those datasets: a later attempt that pulled them again would publish under the same
    execution's JDBC publish marker, where a second publish is taken for the first (a conflict, or
    rows silently dropped: issue #45)."""
    if execution_id is None:
        return {}
    flow_id = flow_id_for(flow_id, flow_group, flow_name)
    rows = DatasetState.objects.filter(
        flow_id=flow_id,
        flow_group=flow_group,
        flow_name=flow_name,
        job_name=job_name,
        execution_id=execution_id,
    ).exclude(last_status=SKIPPED)
    return {state.dataset_urn: state.watermark for state in rows.only("dataset_urn", "watermark")}


def check_in(
    *,
    flow_id: int | None = None,
    flow_group: str,
    flow_name: str,
    job_name: str,
    dataset_urn: str,
    watermark: str,
    execution_id: int | None,
    status: str,
    records: int = 0,
    source_schema: str | None = None,
    reason: str = "",
    changed_by: str = "",
) -> DatasetState:
    """Set a dataset's watermark and add the history row, in one transaction."""
    flow_id = flow_id_for(flow_id, flow_group, flow_name)
    with transaction.atomic():
        state = _locked_state(flow_id, flow_group, flow_name, job_name, dataset_urn)
        previous = state.watermark
        state.watermark = watermark
        state.last_status = status
        state.execution_id = execution_id
        if source_schema:
            state.source_schema = source_schema
        state.save()
        DatasetStateHistory.objects.create(
            state=state,
            execution_id=execution_id,
            previous_watermark=previous,
            watermark=watermark,
            status=status,
            records=records,
            source_schema=source_schema or "",
            reason=reason,
            changed_by=changed_by,
        )
    return state


@register_step_type
class HighWatermarkCommitStep(CommitStep):
    """Check a dataset's actual high watermark into the state store. Done
    when the state already holds this execution's value."""

    type = "high_watermark"

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = dict(data)

    @classmethod
    def build(cls, data: Mapping[str, Any], properties: Mapping[str, str] | None) -> CommitStep:
        data = dict(data)
        for key, prop in (("flow_group", "flow.group"), ("flow_name", "flow.name"), ("job_name", "job.name")):
            if not data.get(key) and properties and properties.get(prop):
                data[key] = properties[prop]
        missing = [
            k for k in ("flow_group", "flow_name", "job_name", "dataset_urn", "value") if k not in data
        ]
        if missing:
            raise ValueError(f"high_watermark step is missing {', '.join(missing)}")
        return cls(data)

    def to_dict(self) -> dict[str, Any]:
        return {**self.data, "type": self.type}

    def _key(self) -> dict[str, Any]:
        d = self.data
        return {
            "flow_id": flow_id_for(d.get("flow_id"), d["flow_group"], d["flow_name"]),
            "flow_group": d["flow_group"],
            "flow_name": d["flow_name"],
            "job_name": d["job_name"],
            "dataset_urn": d["dataset_urn"],
        }

    def verify(self) -> bool:
        state = DatasetState.objects.filter(**self._key()).first()
        return bool(
            state
            and state.execution_id == self.data.get("execution_id")
            and state.watermark == str(self.data["value"])
        )

    def execute(self) -> None:
        check_in(
            **self._key(),
            watermark=str(self.data["value"]),
            execution_id=self.data.get("execution_id"),
            status=self.data.get("status", "COMMITTED"),
            records=int(self.data.get("records") or 0),
            source_schema=self.data.get("source_schema"),
        )


def schema_history(state: DatasetState, limit: int = 50) -> list[dict[str, Any]]:
    """The schema each of the dataset's last ``limit`` committed runs delivered, newest first, with
    what changed from the run before (``schema.evolution.policy``; docs/pipeline.md)."""
    rows = list(
        state.history.exclude(source_schema="")
        .order_by("-created", "-id")
        .only("execution_id", "created", "status", "source_schema")[: limit + 1]
    )
    rows.reverse()
    result = []
    for before, row in zip([None, *rows], rows, strict=False):
        change = schemadrift.diff(before.source_schema, row.source_schema) if before else None
        result.append(
            {
                "execution_id": row.execution_id,
                "created": row.created,
                "status": row.status,
                "columns": schemadrift.columns(row.source_schema),
                "change": "first recorded" if change is None else change.describe(),
                "changed": bool(change),
            }
        )
    return list(reversed(result[1:] if len(rows) > limit else result))


# --- skipped datasets, admin resets -------------------------------------------------------

SKIPPED = "SKIPPED"
RESET = "RESET"


def record_skip(
    *,
    flow_id: int | None = None,
    flow_group: str,
    flow_name: str,
    job_name: str,
    dataset_urn: str,
    execution_id: int | None,
    reason: str,
) -> DatasetState:
    """A run skipped the dataset (its earlier commit could not be finished):
    the watermark stays, the status and a history row say why."""
    flow_id = flow_id_for(flow_id, flow_group, flow_name)
    with transaction.atomic():
        state = _locked_state(flow_id, flow_group, flow_name, job_name, dataset_urn)
        state.last_status = SKIPPED
        state.save(update_fields=["last_status", "updated"])
        DatasetStateHistory.objects.create(
            state=state,
            execution_id=execution_id,
            previous_watermark=state.watermark,
            watermark=state.watermark,
            status=SKIPPED,
            reason=reason[:4000],
        )
    return state


class PendingCommitSteps(Exception):
    """The dataset has unfinished commit steps; a reset would be undone by them."""


def store_name_of(state: DatasetState) -> str:
    return CommitStore.name_for(state.flow_group, state.flow_name, state.job_name, state.flow_id)


@dataclass(frozen=True)
class Waiting:
    """A dataset whose commit a run stored and did not finish, as the flow page says it."""

    dataset_urn: str
    job_name: str
    execution_id: int | None
    attempt: int
    redo_failures: int
    reason: str
    state_id: int | None  # its state page (staff: reset and discard the steps there)


def waiting_datasets(flow_id: int, flow_group: str, flow_name: str) -> list[Waiting]:
    """The flow's datasets waiting to be finished: commit steps stored by a run that is no longer
    running them (its worker died, or their redo failed). A run in the middle of its own commit is
    not listed. Each with why, in words."""
    prefix = f"{flow_group}/{flow_name}/"
    rows = CommitStoreDataset.objects.filter(
        store__name__startswith=prefix, store__name__endswith=f"#{flow_id}"
    ).select_related("store")
    running = {
        (job.execution.execution_id, job.job_name, job.attempt)
        for job in JobExecution.objects.filter(
            execution__flow_group=flow_group, execution__flow_name=flow_name, status=JobStatus.RUNNING
        ).select_related("execution")
    }
    states = {
        (s.job_name, s.dataset_urn): s.pk
        for s in DatasetState.objects.filter(flow_id=flow_id, flow_group=flow_group, flow_name=flow_name)
    }
    found = []
    for row in rows:
        if not row.redo_failures and (row.execution_id, row.job_name, row.attempt) in running:
            continue
        reason = (
            f"{row.redo_failures} redo(s) failed: {row.last_error}"
            if row.redo_failures
            else f"the worker of execution {row.execution_id} (attempt {row.attempt}) stopped before finishing them"
        )
        found.append(
            Waiting(
                row.dataset_urn,
                row.job_name,
                row.execution_id,
                row.attempt,
                row.redo_failures,
                reason[:1000],
                states.get((row.job_name, row.dataset_urn)),
            )
        )
    return found


def pending_steps(state: DatasetState) -> CommitStoreDataset | None:
    """The dataset's unfinished commit steps, if any."""
    return CommitStoreDataset.objects.filter(
        store__name=store_name_of(state), dataset_urn=state.dataset_urn
    ).first()


def reset_watermark(
    state: DatasetState, *, watermark: str, reason: str, changed_by: str, discard_pending: bool = False
) -> DatasetState:
    """Set (or clear, with "") a dataset's watermark by hand: an audited
    history row with the reason and who. Refused while the dataset has
    unfinished commit steps (they would set it back), unless
    `discard_pending` also deletes them — in the same transaction."""
    reason = (reason or "").strip()
    if not reason:
        raise ValueError("A reset needs a reason.")
    with transaction.atomic():
        state = DatasetState.objects.select_for_update().get(pk=state.pk)
        pending = pending_steps(state)
        if pending is not None:
            if not discard_pending:
                raise PendingCommitSteps(
                    f"{state.dataset_urn} has {pending.steps.count()} unfinished commit step(s) written by "
                    f"execution {pending.execution_id}; discard them with the reset, or let the next run "
                    "finish them."
                )
            count = pending.steps.count()
            pending.delete()
            reason = (
                f"{reason} (discarded {count} unfinished commit step(s) of execution {pending.execution_id})"
            )
        previous = state.watermark
        state.watermark = watermark.strip()
        state.last_status = RESET
        state.save(update_fields=["watermark", "last_status", "updated"])
        DatasetStateHistory.objects.create(
            state=state,
            execution_id=state.execution_id,
            previous_watermark=previous,
            watermark=state.watermark,
            status=RESET,
            reason=reason,
            changed_by=changed_by,
        )
    return state


# --- whose state: a flow's own, a deleted flow's, adoption ---------------------------------

ADOPTED = "ADOPTED"


def states_of(flow_group: str, flow_name: str) -> QuerySet[DatasetState]:
    """The datasets a flow's pages show: the current flow's own state, or,
    once no flow has the name, what deleted flows of that name left."""
    flow_id = (
        FlowConfig.objects.filter(flow_group=flow_group, flow_name=flow_name)
        .values_list("pk", flat=True)
        .first()
    )
    rows = DatasetState.objects.filter(flow_group=flow_group, flow_name=flow_name)
    return rows.filter(flow_id=flow_id) if flow_id is not None else rows


def adoptable_state(flow: FlowConfig) -> QuerySet[DatasetState]:
    """State an earlier flow of the same group/name left (its flow deleted)."""
    return DatasetState.objects.filter(flow_group=flow.flow_group, flow_name=flow.flow_name).exclude(
        flow_id=flow.pk
    )


class AdoptionRefused(Exception):
    """Why the state cannot be adopted (shown to the user as is)."""


def _adopt_pending_steps(orphans: list[DatasetState], flow: FlowConfig) -> None:
    """Unfinished commit steps go with the state they would move: the
    adopting flow's next run finishes them (else they would set the adopted
    watermark back, or be lost)."""
    for state in orphans:
        pending = pending_steps(state)
        if pending is None:
            continue
        name = CommitStore.name_for(state.flow_group, state.flow_name, state.job_name, flow.pk)
        store, _ = CommitStore.objects.get_or_create(name=name)
        if CommitStoreDataset.objects.filter(store=store, dataset_urn=state.dataset_urn).exists():
            raise AdoptionRefused(
                f"This flow has unfinished commit steps of its own for {state.dataset_urn}; "
                "let its next run finish them first."
            )
        pending.store = store
        pending.save(update_fields=["store"])
        for record in pending.steps.filter(step__type=HighWatermarkCommitStep.type):
            record.step = {**record.step, "flow_id": flow.pk}  # it checks in the adopting flow's state
            record.save(update_fields=["step"])


def adopt_state(flow: FlowConfig, *, user: Principal) -> int:
    """Make an earlier flow's state (same group/name, that flow deleted) this
    flow's own, so its next run continues from those watermarks. Only the
    user who may change this flow and made the earlier one's state (or staff)
    may, as accounts.access decides (the rules of FlowConfig and
    DatasetState): the watermarks say how far another user's data was read.
    Refused while this flow has state of its own for the same datasets.
    Returns the number of datasets adopted; each gets an audited history row."""
    if not access.can(user, access.CHANGE, flow):
        raise AdoptionRefused("Only the flow's owner, its owning group or staff can adopt state for it.")
    with transaction.atomic():
        orphans = list(adoptable_state(flow).select_for_update())
        if not orphans:
            raise AdoptionRefused(
                f"{flow.flow_group}/{flow.flow_name} has no state of a deleted flow to adopt."
            )
        live = [s.flow_id for s in orphans if s.flow_id is not None]
        if FlowConfig.objects.filter(pk__in=live).exists():
            raise AdoptionRefused("That state belongs to a flow that still exists.")
        yours = access.restrict(
            DatasetState.objects.filter(pk__in=[s.pk for s in orphans]), user, access.CHANGE
        )
        if yours.count() != len(orphans):
            raise AdoptionRefused(
                "That state was made by a flow you did not own; ask staff to move it if it should be yours."
            )
        own = set(DatasetState.objects.filter(flow_id=flow.pk).values_list("job_name", "dataset_urn"))
        clash = sorted(urn for state in orphans if (state.job_name, urn := state.dataset_urn) in own)
        if clash:
            raise AdoptionRefused(
                f"This flow already has state of its own for {', '.join(clash[:5])}; reset it first or keep it."
            )
        _adopt_pending_steps(orphans, flow)
        for state in orphans:
            previous_flow = state.flow_id
            state.flow_id, state.owner_id = flow.pk, flow.owner_id
            state.save(update_fields=["flow_id", "owner_id", "updated"])
            DatasetStateHistory.objects.create(
                state=state,
                execution_id=state.execution_id,
                previous_watermark=state.watermark,
                watermark=state.watermark,
                status=ADOPTED,
                reason=f"Adopted by flow #{flow.pk} from deleted flow #{previous_flow or '?'}.",
                changed_by=user.get_username(),
            )
    return len(orphans)


# --- the JobState of each run ------------------------------------------------------------


def start_job_state(job: JobExecution, attempt: int, worker: str) -> JobState:
    state, _ = JobState.objects.update_or_create(
        job=job,
        attempt=attempt,
        defaults={"worker": worker, "status": JobStatus.RUNNING, "started_at": timezone.now()},
    )
    return state


def finish_job_state(state: JobState, status: str, message: str = "", **fields: Any) -> None:
    state.status, state.message, state.ended_at = status, message[:4000], timezone.now()
    for name, value in fields.items():
        setattr(state, name, value)
    state.save()
