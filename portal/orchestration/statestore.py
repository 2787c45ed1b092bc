"""The state store: each dataset's watermark per (flow, job, dataset.urn),
with a history row per committed run. Previous watermarks come from here by
URN, so a dataset a run skipped keeps its watermark; the `high_watermark`
commit step writes here, verified like every other step.

Also here: a skipped dataset's status row (`record_skip`), the admins'
audited watermark reset (`reset_watermark`), and the JobState of each run
(one `JobState` row per attempt: `start_job_state` / `finish_job_state`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from portal.orchestration.models import (
    CommitStoreDataset,
    DatasetState,
    DatasetStateHistory,
    JobExecution,
    JobState,
    JobStatus,
)
from portal.pipeline.commit_steps import CommitStep, register_step_type


def previous_state(flow_group: str, flow_name: str, job_name: str) -> tuple[dict[str, str], dict[str, str]]:
    """(watermarks, source schemas) by dataset URN, for the JobSpec."""
    watermarks: dict[str, str] = {}
    schemas: dict[str, str] = {}
    rows = DatasetState.objects.filter(flow_group=flow_group, flow_name=flow_name, job_name=job_name)
    for state in rows.only("dataset_urn", "watermark", "source_schema"):
        if state.watermark:
            watermarks[state.dataset_urn] = state.watermark
        if state.source_schema:
            schemas[state.dataset_urn] = state.source_schema
    return watermarks, schemas


def check_in(
    *,
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
    with transaction.atomic():
        state, _ = DatasetState.objects.select_for_update().get_or_create(
            flow_group=flow_group, flow_name=flow_name, job_name=job_name, dataset_urn=dataset_urn
        )
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

    def _key(self) -> dict[str, str]:
        d = self.data
        return {
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


# --- skipped datasets, admin resets -------------------------------------------------------

SKIPPED = "SKIPPED"
RESET = "RESET"


def record_skip(
    *, flow_group: str, flow_name: str, job_name: str, dataset_urn: str, execution_id: int | None, reason: str
) -> DatasetState:
    """A run skipped the dataset (its earlier commit could not be finished):
    the watermark stays, the status and a history row say why."""
    with transaction.atomic():
        state, _ = DatasetState.objects.select_for_update().get_or_create(
            flow_group=flow_group, flow_name=flow_name, job_name=job_name, dataset_urn=dataset_urn
        )
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
    return f"{state.flow_group}/{state.flow_name}/{state.job_name}"


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
