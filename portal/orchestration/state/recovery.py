"""Recovery: a run finishes the commit steps an earlier run left behind
before it pulls new data (the "next run" of Gobblin's exactly-once design).

For each dataset of the job's store with unfinished steps — in parallel,
`commit.step.parallelism` threads — the sequence is run again (each step
verified first, redone if not done), up to `commit.step.max.redo` times
(default 3) in this run. A dataset whose steps still fail is SKIPPED for this
run: it is not pulled (pulling before its watermark moved would publish the
same records twice), its steps stay in the store for the next run, its state
gets a SKIPPED history row, and an alert event `dataset.skipped` is
raised. The rest of the job goes on.

Skipping a dataset in the pipeline: `exclude_datasets` takes it out of the
source's dataset list (`source.files.datasets`, `source.jdbc.tables`); for
other sources the worker drops the skipped datasets' TaskStates before
planning the commit, so their output is never published.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from portal.events.models import Event
from portal.events.services import raise_event
from portal.orchestration.models import CommitStoreDataset
from portal.orchestration.state import statestore
from portal.orchestration.state.commitstore import (
    CommitSequence,
    CommitStepStore,
    max_redo,
    parallel_map,
    parallelism,
    store_name_for,
)
from portal.pipeline import fs, usernode
from portal.pipeline.destinations.base import takes_user_node
from portal.pipeline.destinations.commit_steps import CommitStep
from portal.pipeline.destinations.commitplan import remove_task_output
from portal.pipeline.jobspec import JobSpec, with_node_credentials
from portal.pipeline.sources import cdc, jdbc_tables

logger = logging.getLogger(__name__)

RECOVERED = "RECOVERED"
SKIPPED = "SKIPPED"
FILES_SOURCE = "portal.pipeline.sources.files.FileSource"
JDBC_SOURCE = "portal.pipeline.sources.jdbc.JdbcSource"


@dataclass
class DatasetRecovery:
    dataset_urn: str
    execution_id: int | None
    attempt: int
    steps: int
    token: int = 0
    status: str = RECOVERED
    executed: int = 0
    tries: int = 0
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "execution_id": self.execution_id,
            "attempt": self.attempt,
            "steps": self.steps,
            "executed": self.executed,
            "tries": self.tries,
            "status": self.status,
            "message": self.message,
        }


@dataclass
class RecoveryReport:
    datasets: dict[str, DatasetRecovery] = field(default_factory=dict)

    @property
    def skipped(self) -> dict[str, DatasetRecovery]:
        return {u: d for u, d in self.datasets.items() if d.status == SKIPPED}

    @property
    def recovered(self) -> dict[str, DatasetRecovery]:
        return {u: d for u, d in self.datasets.items() if d.status == RECOVERED}

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {urn: d.to_dict() for urn, d in sorted(self.datasets.items())}

    def summary(self) -> str:
        parts = []
        if self.recovered:
            steps = sum(d.executed for d in self.recovered.values())
            parts.append(f"recovered {len(self.recovered)} dataset(s) ({steps} step(s) redone)")
        if self.skipped:
            parts.append(f"skipped {len(self.skipped)}: {', '.join(sorted(self.skipped))}")
        return "; ".join(parts)


def _redo_delay(tries: int) -> float:
    return min(2.0, 0.25 * 2.0 ** (tries - 1))


def judged_now(step: dict[str, Any], entry: dict[str, Any] | None) -> dict[str, Any]:
    """A stored step that keeps no judged login's bounds (written before they were kept, or when
    its node still had an account) is judged as the job's destination node is judged now
    (``entry``, :func:`portal.pipeline.usernode.spec_entry`): where the data is touched, today."""
    if entry is None or step.get("user_node") or not takes_user_node(str(step.get("type"))):
        return step
    return {**step, "user_node": entry}


def _recover_one(
    store: CommitStepStore,
    store_name: str,
    row: CommitStoreDataset,
    properties: Mapping[str, str],
    redo: int,
    judged: dict[str, Any] | None = None,
) -> DatasetRecovery:
    dicts = [judged_now(d, judged) for d in store.step_dicts(row.pk)]
    result = DatasetRecovery(row.dataset_urn, row.execution_id, row.attempt, len(dicts), row.pk)
    error = ""
    for tries in range(1, redo + 1):
        result.tries = tries
        try:
            steps = [CommitStep.from_dict(d, properties) for d in dicts]
            sequence = CommitSequence(
                store_name, row.dataset_urn, steps, store, token=row.pk, phase="recovery."
            )
            result.executed = sequence.run()
            result.message = (
                f"finished the commit of execution {row.execution_id} (attempt {row.attempt}): "
                f"{result.executed} of {len(dicts)} step(s) redone"
            )
            return result
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            store.record_redo_failure(row.pk, error)
            logger.warning("redo %d/%d of %s %s failed: %s", tries, redo, store_name, row.dataset_urn, error)
            if tries < redo:
                time.sleep(_redo_delay(tries))
    result.status = SKIPPED
    result.message = (
        f"Dataset {row.dataset_urn} skipped: the commit steps left by execution {row.execution_id} "
        f"(attempt {row.attempt}) could not be finished after {redo} redo(s): {error}. They stay in the "
        "commit-step store; the next run tries again (fix the cause, or reset the watermark and "
        "discard the steps on the dataset's state page)."
    )[:4000]
    return result


def recover(
    spec: dict[str, Any] | JobSpec, *, initializer: Callable[[], object] | None = None
) -> RecoveryReport:
    """Finish the job's leftover commit steps (see the module docstring).
    `spec`'s properties are the job's decrypted ones (JDBC steps name their
    password by property); `initializer` runs first in each thread."""
    spec = JobSpec.from_dict(spec)
    props = with_node_credentials(spec.properties)  # a node's password, for the steps that name it
    store, store_name = CommitStepStore(), store_name_for(spec)
    report = RecoveryReport()
    rows = store.pending(store_name)
    if not rows:
        return report
    redo = max_redo(props)
    judged = usernode.spec_entry(spec.extra, "destination")
    results = parallel_map(
        lambda row: _recover_one(store, store_name, row, props, redo, judged),
        rows,
        parallelism(props, len(rows)),
        initializer,
    )
    report.datasets = {r.dataset_urn: r for r in results}
    _cleanup_recovered_runs(store, store_name, rows, report)
    for result in report.skipped.values():
        statestore.record_skip(
            flow_id=spec.flow_id,
            flow_group=spec.flow_group,
            flow_name=spec.flow_name,
            job_name=spec.job_name,
            dataset_urn=result.dataset_urn,
            execution_id=spec.execution_id,
            reason=result.message,
        )
        raise_event(
            "dataset.skipped",
            f"{spec.job_name}: {result.message}",
            severity=Event.Severity.ERROR,
            # once per stuck commit: every later run it holds back says so in its own status
            dedupe_key=f"dataset.skipped:{store_name}:{result.token}",
            subject=result.dataset_urn[:200],
            flow_group=spec.flow_group,
            flow_name=spec.flow_name,
            execution_id=spec.execution_id,
            job_name=spec.job_name,
        )
    return report


def _cleanup_recovered_runs(
    store: CommitStepStore, store_name: str, rows: list[CommitStoreDataset], report: RecoveryReport
) -> None:
    """Delete the task output of each earlier run whose steps are now all done."""
    still = {row.execution_id for row in store.pending(store_name)}
    seen: set[tuple[int | None, str, str]] = set()
    for row in rows:
        key = (row.execution_id, row.job_name, row.work_dir)
        if row.execution_id is None or row.execution_id in still or key in seen or not row.work_dir:
            continue
        seen.add(key)
        remove_task_output(row.work_dir, row.job_name, row.execution_id)


def exclude_datasets(spec: JobSpec, skipped: set[str]) -> JobSpec | None:  # noqa: C901
    """The JobSpec without the `skipped` datasets (skipped by recovery, or already delivered by an
    earlier attempt of the execution), or None when nothing is left to pull. Files and JDBC
    sources get a narrowed dataset list; other sources run unchanged (the worker drops the
    skipped datasets' TaskStates), a cdc source not at all once every table of it is left out."""
    if not skipped:
        return spec
    backfill = {u: dict(b) for u, b in spec.backfill.items() if u not in skipped}
    if spec.backfill and not backfill:
        # A backfill runs only the datasets it lists: drop the skipped ones,
        # and run nothing (not a normal run!) when none is left.
        return None
    props, raw = spec.props, dict(spec.properties)
    source = props.get("source.class") or ""
    if source == JDBC_SOURCE:
        tables = props.get_list(jdbc_tables.TABLES_KEY)
        if jdbc_tables.has_patterns(tables):  # matched on the worker: leave the skipped ones out there
            raw[jdbc_tables.EXCLUDE_KEY] = ",".join(
                [*props.get_list(jdbc_tables.EXCLUDE_KEY), *sorted(skipped)]
            )
            return spec
        keep = [t for t in tables if t not in skipped]
        if not keep:
            return None
        raw["source.jdbc.tables"] = ",".join(keep)
    elif source == cdc.CDC_SOURCE_CLASS:
        # Its tables share one log read: it runs while one is left (the rest's TaskStates are dropped).
        if all(t in skipped for t in props.get_list(cdc.TABLES_KEY)):
            return None
    elif source == FILES_SOURCE:
        root = props.get("source.files.path") or ""
        if (props.get_int("source.files.dataset.level", 1) or 0) == 0:
            urn = props.get("dataset.urn") or root.rstrip("/").rsplit("/", 1)[-1] or "files"
            if urn in skipped:
                return None
        else:
            names = props.get_list("source.files.datasets") or (fs.list_dirs(root) if root else [])
            keep = [n for n in names if n not in skipped]
            if not keep:
                return None
            raw["source.files.datasets"] = ",".join(keep)
    return replace(spec, properties=raw, backfill=backfill)
