"""Gobblin's CommitStepStore (its exactly-once design), in the portal DB.

Publishing a dataset is a list of CommitSteps (`fs_rename`, `jdbc_publish`,
`high_watermark`), each with `verify()` ("already done?") and `execute()`.
Like a write-ahead log, the worker first writes ALL of a dataset's steps to
this store in one transaction, then runs them (`if not verify(): execute()`),
then removes them. A crash anywhere leaves either nothing (no step written:
nothing was published and the watermark did not move, so the next run pulls
the same data again) or the full list, which the next run finishes before it
pulls anything new for that dataset (see `recovery`).

The store is keyed by `(store name, dataset URN)`; the store name of a job
is `<flow_group>/<flow_name>/<job_name>#<flow id>` (CommitStore.name_for). The interface is Gobblin's:
`create`, `exists`, `put`, `get_commit_sequence`, `remove`, plus `put_all`
(the one-transaction write) and `pending` (what recovery looks at).

Failpoints: `failpoint(name)` is called at every point where a crash matters
(documented in docs/exactly-once.md). It does nothing unless armed by the
environment — `FLOWPORT_FAILPOINT=<name>[,<name>...]` (a name may be
`<name>@<dataset urn>`), or `FLOWPORT_FAILPOINT_FILE=<path>` holding such a
list, read at each point so a running worker can be armed — or in-process
with `arm()`. `FLOWPORT_FAILPOINT_ACTION=kill` (default) sends SIGKILL to
the process; `raise` raises `FailpointCrash` (a BaseException, so no error
handler catches it) and makes every later failpoint raise too, like a crash.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from django.db import IntegrityError, connections, transaction
from django.utils import timezone

from portal.orchestration.models import CommitStepRecord, CommitStore, CommitStoreDataset
from portal.orchestration.state import statestore  # noqa: F401  (registers the high_watermark step)
from portal.pipeline.destinations.commit_steps import CommitStep
from portal.pipeline.jobspec import JobSpec

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


# --- failpoints ----------------------------------------------------------------------

FAILPOINT_ENV = "FLOWPORT_FAILPOINT"
FAILPOINT_FILE_ENV = "FLOWPORT_FAILPOINT_FILE"
FAILPOINT_ACTION_ENV = "FLOWPORT_FAILPOINT_ACTION"

_armed: dict[str, str] = {}  # in-process: name -> action
_crashed = threading.Event()  # set once a `raise` failpoint fired (a crash stops everything)


class FailpointCrash(BaseException):
    """A simulated crash. A BaseException so that no `except Exception` in the
    commit path handles it: it unwinds like the process died."""


def _armed_names() -> tuple[set[str], str]:
    names = set(_armed)
    spec = os.environ.get(FAILPOINT_ENV, "")
    path = os.environ.get(FAILPOINT_FILE_ENV, "")
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                spec = f"{spec},{fh.read()}"
        except OSError:
            pass
    names.update(n.strip() for n in spec.replace("\n", ",").split(",") if n.strip())
    return names, os.environ.get(FAILPOINT_ACTION_ENV, "kill")


def failpoint(name: str, dataset_urn: str = "") -> None:
    """Crash here if `name` (or `name@dataset_urn`) is armed; else nothing."""
    if _crashed.is_set():
        raise FailpointCrash(f"{name} (after an earlier simulated crash)")
    if not _armed and FAILPOINT_ENV not in os.environ and FAILPOINT_FILE_ENV not in os.environ:
        return
    names, action = _armed_names()
    hit = name if name in names else f"{name}@{dataset_urn}" if f"{name}@{dataset_urn}" in names else ""
    if not hit:
        return
    action = _armed.get(hit, action)
    logger.warning("failpoint %s hit (%s)", hit, action)
    if action == "raise":
        _crashed.set()
        raise FailpointCrash(hit)
    os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def arm(*names: str, action: str = "raise") -> Iterator[None]:
    """In-process failpoints for tests: `with arm("after_step:2"): ...`."""
    for name in names:
        _armed[name] = action
    try:
        yield
    finally:
        for name in names:
            _armed.pop(name, None)
        _crashed.clear()


def reset_failpoints() -> None:
    _armed.clear()
    _crashed.clear()


# --- running per dataset in parallel -------------------------------------------------


def parallel_map(
    func: Callable[[T], R],
    items: Iterable[T],
    workers: int,
    initializer: Callable[[], object] | None = None,
) -> list[R]:
    """`[func(item) for item in items]` on up to `workers` threads, results
    in order. Each thread runs `initializer` first, takes items until none
    are left and closes its DB connections when done. The first exception
    (a FailpointCrash included) is re-raised once the threads stopped."""
    todo = list(items)
    if workers <= 1 or len(todo) <= 1:
        if initializer is not None and todo:
            initializer()
        return [func(item) for item in todo]
    results: list[Any] = [None] * len(todo)
    feed = iter(enumerate(todo))
    lock = threading.Lock()
    failed = threading.Event()

    def loop() -> None:
        try:
            if initializer is not None:
                initializer()
            while not failed.is_set():
                with lock:
                    nxt = next(feed, None)
                if nxt is None:
                    return
                index, item = nxt
                try:
                    results[index] = func(item)
                except BaseException:
                    failed.set()
                    raise
        finally:
            connections.close_all()

    count = min(workers, len(todo))
    with ThreadPoolExecutor(max_workers=count, thread_name_prefix="commit") as pool:
        futures = [pool.submit(loop) for _ in range(count)]
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
    return results


def parallelism(properties: Mapping[str, str], items: int) -> int:
    """Threads for per-dataset commit/recovery: `commit.step.parallelism`
    (default 8), never more than there are datasets."""
    try:
        wanted = int(properties.get("commit.step.parallelism") or 8)
    except ValueError:
        wanted = 8
    return max(1, min(wanted, items))


def max_redo(properties: Mapping[str, str]) -> int:
    """`commit.step.max.redo` (default 3): attempts at a dataset's commit sequence per run."""
    try:
        return max(1, int(properties.get("commit.step.max.redo") or 3))
    except ValueError:
        return 3


# --- the store -----------------------------------------------------------------------


class CommitStepsPending(Exception):
    """A dataset already has unfinished steps: finish (recover) them first."""


class StaleAttempt(Exception):
    """The attempt writing the steps is no longer the job's current one."""


def store_name_for(jobspec: dict[str, Any] | JobSpec) -> str:
    spec = JobSpec.from_dict(jobspec)
    return CommitStore.name_for(spec.flow_group, spec.flow_name, spec.job_name, spec.flow_id)


def _as_dict(step: CommitStep | Mapping[str, Any]) -> dict[str, Any]:
    return step.to_dict() if isinstance(step, CommitStep) else dict(step)


class CommitStepStore:
    """Gobblin's CommitStepStore interface over the portal DB (stateless:
    every method is one short transaction, safe from any thread)."""

    # Gobblin: create(storeName), create(storeName, datasetUrn)
    def create(self, store_name: str, dataset_urn: str | None = None) -> bool:
        """Create the store (or a dataset URN in it); False if it existed."""
        store, created = CommitStore.objects.get_or_create(name=store_name)
        if dataset_urn is None:
            return created
        try:
            with transaction.atomic():
                _, created = CommitStoreDataset.objects.get_or_create(store=store, dataset_urn=dataset_urn)
        except IntegrityError:  # created concurrently
            return False
        return created

    def exists(self, store_name: str, dataset_urn: str) -> bool:
        return CommitStoreDataset.objects.filter(store__name=store_name, dataset_urn=dataset_urn).exists()

    # Gobblin: remove(storeName), remove(storeName, datasetUrn)
    def remove(self, store_name: str, dataset_urn: str | None = None, *, token: int | None = None) -> bool:
        """Remove the store, or a dataset's steps. With `token` (the id
        `put_all` returned) only those steps go, never another run's."""
        if dataset_urn is None:
            deleted, _ = CommitStore.objects.filter(name=store_name).delete()
            return bool(deleted)
        rows = CommitStoreDataset.objects.filter(store__name=store_name, dataset_urn=dataset_urn)
        if token is not None:
            rows = rows.filter(pk=token)
        deleted, _ = rows.delete()
        return bool(deleted)

    def put(self, store_name: str, dataset_urn: str, step: CommitStep | Mapping[str, Any]) -> bool:
        """Append one step to a dataset (created if needed)."""
        with transaction.atomic():
            store, _ = CommitStore.objects.get_or_create(name=store_name)
            dataset, _ = CommitStoreDataset.objects.select_for_update().get_or_create(
                store=store, dataset_urn=dataset_urn
            )
            last = dataset.steps.order_by("-position").values_list("position", flat=True).first()
            CommitStepRecord.objects.create(
                dataset=dataset, position=0 if last is None else last + 1, step=_as_dict(step)
            )
        return True

    def put_all(
        self,
        store_name: str,
        dataset_urn: str,
        steps: Sequence[CommitStep | Mapping[str, Any]],
        *,
        execution_id: int | None = None,
        attempt: int = 0,
        job_name: str = "",
        work_dir: str = "",
        fence: Callable[[], bool] | None = None,
    ) -> int:
        """Write ALL of a dataset's steps in ONE transaction; returns the
        token for `remove`. Refuses (CommitStepsPending) when the dataset
        still has steps, and (StaleAttempt) when `fence()` says the writer
        is no longer the job's current attempt."""
        store, _ = CommitStore.objects.get_or_create(name=store_name)
        try:
            with transaction.atomic():
                if fence is not None and not fence():
                    raise StaleAttempt(
                        f"attempt {attempt} of {job_name} is no longer current; its steps are not written"
                    )
                dataset = CommitStoreDataset.objects.create(
                    store=store,
                    dataset_urn=dataset_urn,
                    execution_id=execution_id,
                    attempt=attempt,
                    job_name=job_name,
                    work_dir=work_dir,
                )
                CommitStepRecord.objects.bulk_create(
                    [
                        CommitStepRecord(dataset=dataset, position=i, step=_as_dict(step))
                        for i, step in enumerate(steps)
                    ],
                    batch_size=2000,
                )
        except IntegrityError:
            raise CommitStepsPending(
                f"dataset {dataset_urn} of {store_name} still has unfinished commit steps"
            ) from None
        return dataset.pk

    def pending(self, store_name: str) -> list[CommitStoreDataset]:
        """The datasets of a store with unfinished steps, oldest first."""
        return list(
            CommitStoreDataset.objects.filter(store__name=store_name).order_by("written_at", "dataset_urn")
        )

    def step_dicts(self, token: int) -> list[dict[str, Any]]:
        return list(
            CommitStepRecord.objects.filter(dataset_id=token)
            .order_by("position")
            .values_list("step", flat=True)
        )

    def get_commit_sequence(
        self,
        store_name: str,
        dataset_urn: str,
        properties: Mapping[str, str] | None = None,
        *,
        phase: str = "",
    ) -> CommitSequence | None:
        """The dataset's steps as a runnable sequence, or None if it has none.
        `properties` (the job's, decrypted) supply secrets steps name by property."""
        dataset = CommitStoreDataset.objects.filter(store__name=store_name, dataset_urn=dataset_urn).first()
        if dataset is None:
            return None
        steps = [CommitStep.from_dict(d, properties) for d in self.step_dicts(dataset.pk)]
        return CommitSequence(store_name, dataset_urn, steps, self, token=dataset.pk, phase=phase)

    def record_redo_failure(self, token: int, error: str) -> None:
        from django.db.models import F

        CommitStoreDataset.objects.filter(pk=token).update(
            redo_failures=F("redo_failures") + 1, last_error=error[:4000], last_redo_at=timezone.now()
        )


class CommitSequence:
    """Gobblin's CommitSequence: a dataset's steps, run in order — for each
    step `if not verify(): execute()` — then removed from the store. Running
    it again after a crash finishes what is left; a second complete run
    changes nothing.

    `phase` prefixes the failpoint names (`""` for a run's own commit,
    `"recovery."` when finishing an earlier run's steps)."""

    def __init__(
        self,
        store_name: str,
        dataset_urn: str,
        steps: list[CommitStep],
        commit_step_store: CommitStepStore,
        *,
        token: int | None = None,
        phase: str = "",
    ) -> None:
        self.store_name = store_name
        self.dataset_urn = dataset_urn
        self.steps = steps
        self.commit_step_store = commit_step_store
        self.token = token
        self.phase = phase
        self.executed = 0
        self.error = ""

    def run(self) -> int:
        """Do the steps not yet done, then remove them; returns how many were
        executed. Raises on the first failing step (the steps stay stored)."""
        executed = 0
        urn = self.dataset_urn
        last = len(self.steps)
        for position, step in enumerate(self.steps, start=1):
            if not step.verify():
                step.execute()
                executed += 1
            self.executed = executed
            if position < last:
                failpoint(f"{self.phase}after_step:{position}", urn)
        failpoint(f"{self.phase}before_steps_removed", urn)
        self.commit_step_store.remove(self.store_name, urn, token=self.token)
        failpoint(f"{self.phase}after_steps_removed", urn)
        return executed

    def commit(self) -> bool:
        """Gobblin's `commit()`: True when every step is done and removed."""
        try:
            self.run()
            return True
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            logger.error("commit failed for dataset %s of %s: %s", self.dataset_urn, self.store_name, exc)
            return False
