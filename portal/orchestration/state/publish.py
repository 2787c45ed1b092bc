"""Publishing a job's output exactly once: per dataset, all its commit steps
(file renames, the high-watermark update) go to the CommitStepStore in one
transaction, then run as a CommitSequence and are removed. The worker calls
`commit()` after the pipeline computed the steps; recovery (recovery.py)
finishes what a crashed run left in the store."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from portal.flows.models import FlowConfig
from portal.orchestration.models import CommitStoreDataset, JobExecution, JobStatus
from portal.orchestration.state.commitstore import (
    CommitSequence,
    CommitStepStore,
    failpoint,
    max_redo,
    parallel_map,
    parallelism,
    store_name_for,
)
from portal.pipeline.destinations.commit_steps import CommitStep
from portal.pipeline.destinations.commitplan import apply_commit_policy, plan_commit
from portal.pipeline.destinations.jdbc import JdbcPublishCommitStep
from portal.pipeline.jobspec import JobSpec, with_node_credentials
from portal.pipeline.taskstate import SUCCEEDED
from portal.topology import tables

logger = logging.getLogger(__name__)


@dataclass
class DatasetCommit:
    """What the commit did for one dataset."""

    dataset_urn: str
    steps: int
    executed: int = 0
    done: bool = False
    tries: int = 0
    watermark: str | None = None
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": "COMMITTED" if self.done else "COMMIT_FAILED",
            "steps": self.steps,
            "executed": self.executed,
            "tries": self.tries,
            "watermark": self.watermark,
            "message": self.error,
        }


def watermark_steps(
    jobspec: dict[str, Any] | JobSpec, states: list[dict[str, Any]], plan: dict[str, list[dict[str, Any]]]
) -> None:
    """Give each high_watermark step what the state store needs (who, records, status), and the
    schema the dataset's committed tasks delivered: the schema recorded for the next run's
    ``schema.evolution.policy`` (a task that was not committed records nothing, so a schema a
    ``freeze`` refused stays refused)."""
    spec = JobSpec.from_dict(jobspec)
    committed = {s["task_id"] for s in apply_commit_policy(spec, states) if s["committed"]}
    for urn, steps in plan.items():
        tasks = [s for s in states if s["dataset_urn"] == urn]
        delivered = [t for t in tasks if t["task_id"] in committed and t.get("source_schema")]
        for step in steps:
            if step["type"] == "high_watermark":
                step.update(
                    flow_id=spec.flow_id,
                    flow_group=spec.flow_group,
                    flow_name=spec.flow_name,
                    job_name=spec.job_name,
                    execution_id=spec.execution_id,
                    records=sum(int(t.get("records_extracted") or 0) for t in tasks),
                    source_schema=delivered[-1]["source_schema"] if delivered else None,
                    status="COMMITTED" if all(t["status"] == SUCCEEDED for t in tasks) else "FAILED",
                )


def staged_still_needed(spec: JobSpec, store_name: str) -> set[int]:
    """The executions of this job whose staging tables must stay: still pending, dispatched or
    running (a flow may allow concurrent executions), or with commit steps still stored."""
    live = JobExecution.objects.filter(
        job_name=spec.job_name,
        execution__flow_group=spec.flow_group,
        execution__flow_name=spec.flow_name,
        status__in=(JobStatus.PENDING, JobStatus.ORCHESTRATED, JobStatus.RUNNING),
    ).values_list("execution__execution_id", flat=True)
    stored = CommitStoreDataset.objects.filter(store__name=store_name, job_name=spec.job_name)
    return {int(e) for e in live} | {int(e) for e in stored.values_list("execution_id", flat=True) if e}


def sweep_staging(steps: list[CommitStep], keep: set[int]) -> None:
    """Once a dataset is published: drop the staging tables earlier executions of the job left
    beside its tables (killed or given up after staging, before their steps were stored), but
    those ``keep`` names. Best effort: a leftover costs only space, so a failure is logged."""
    for step in steps:
        sweep = getattr(step, "sweep", None)
        if sweep is None:
            continue
        try:
            gone = sweep(keep)
        except Exception as exc:  # the publish stands; the next one sweeps again
            logger.warning("staging tables left by earlier runs were not swept: %s", exc)
            continue
        if gone:
            logger.info("dropped %d staging table(s) left by earlier runs: %s", len(gone), ", ".join(gone))


def table_refusal(spec: JobSpec, steps: list[CommitStep]) -> str | None:
    """Whether a step would write into a table of the destination that the flow's owner does not
    own (portal.topology.tables), asked of the table as its database names it."""
    flow = (
        FlowConfig.objects.select_related("owner")
        .filter(flow_group=spec.flow_group, flow_name=spec.flow_name)
        .first()
    )
    node = spec.properties.get("flowport.hop.destination") or ""
    owner = flow.owner if flow is not None else None
    for step in steps:
        reason = tables.step_refusal(owner, node, step, f"{spec.flow_group}/{spec.flow_name}")
        if reason:
            return reason
    return None


def commit(
    jobspec: dict[str, Any] | JobSpec,
    states: list[dict[str, Any]],
    *,
    job: JobExecution | None = None,
    attempt: int = 0,
    initializer: Callable[[], object] | None = None,
) -> dict[str, DatasetCommit]:
    """Publish and check in watermarks, per dataset, in parallel
    (`commit.step.parallelism` threads). For each dataset: ALL its steps go
    to the CommitStepStore in one transaction, then the sequence runs
    (verify, else execute, step by step) and removes them. A sequence that
    fails is tried `commit.step.max.redo` times; after that its steps stay
    stored and the next run finishes them before pulling that dataset.
    `spec`'s properties are the decrypted ones (JDBC steps name their password
    by property)."""
    spec = JobSpec.from_dict(jobspec)
    props = with_node_credentials(spec.properties)  # a node's password, for the steps that name it
    plan = plan_commit(spec, states)
    watermark_steps(spec, states, plan)
    store, store_name = CommitStepStore(), store_name_for(spec)
    store.create(store_name)
    work_dir = spec.job_work_dir
    redo = max_redo(props)

    def current() -> bool:
        """The fence: a superseded attempt (its worker was given up on) writes nothing."""
        assert job is not None
        return JobExecution.objects.filter(pk=job.pk, attempt=attempt, status=JobStatus.RUNNING).exists()

    def one(urn: str) -> DatasetCommit:
        dicts = plan[urn]
        result = DatasetCommit(urn, len(dicts))
        result.watermark = next((str(d["value"]) for d in dicts if d["type"] == "high_watermark"), None)
        if not dicts:
            result.done = True
            return result
        try:
            steps = [CommitStep.from_dict(d, props) for d in dicts]
            refused = table_refusal(spec, steps)
            if refused:  # nothing stored, nothing published into another's table
                result.error = f"{urn}: refused: {refused}"
                return result
            token = store.put_all(
                store_name,
                urn,
                dicts,
                execution_id=spec.execution_id,
                attempt=attempt,
                job_name=spec.job_name,
                work_dir=work_dir,
                fence=current if job is not None else None,
            )
        except Exception as exc:  # nothing stored, nothing published: the next run pulls it again
            result.error = f"{urn}: commit steps not written: {type(exc).__name__}: {exc}"
            return result
        failpoint("after_steps_written", urn)
        sequence = CommitSequence(store_name, urn, steps, store, token=token)
        for tries in range(1, redo + 1):
            result.tries = tries
            try:
                result.executed = sequence.run()
                result.done = True
                sweep_staging(steps, keep)
                return result
            except Exception as exc:
                result.error = f"{type(exc).__name__}: {exc}"
                store.record_redo_failure(token, result.error)
                logger.warning("commit %d/%d of %s %s failed: %s", tries, redo, store_name, urn, result.error)
                if tries < redo:
                    time.sleep(min(2.0, 0.25 * 2 ** (tries - 1)))
        result.error = (
            f"commit of {urn} failed after {redo} attempt(s): {result.error}; its steps stay in the "
            "commit-step store and the next run finishes them before pulling this dataset"
        )
        return result

    urns = sorted(plan)
    stages = any(d["type"] == JdbcPublishCommitStep.type for dicts in plan.values() for d in dicts)
    keep = staged_still_needed(spec, store_name) if stages else set()
    results = parallel_map(one, urns, parallelism(props, len(urns)), initializer)
    return {r.dataset_urn: r for r in results}
