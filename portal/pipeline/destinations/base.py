"""The destination contract: a DataWriter stages a branch's records, CommitSteps publish them.

A writer is built once per task branch with a :class:`WriterContext`; it validates its configuration
in ``__init__`` (before any record is read) and writes the branch to staging in
:meth:`DataWriter.write`. Nothing a writer does is visible to readers: the commit plan
(:mod:`portal.pipeline.destinations.commitplan`) turns what it staged into CommitSteps, which the
orchestration layer stores and runs.

A :class:`CommitStep` is JSON (``to_dict`` / :meth:`CommitStep.from_dict`) so it can sit in the
CommitStepStore, and has ``verify() -> bool`` ("already done?") and ``execute()``; running
``if not step.verify(): step.execute()`` again after a crash finishes what is left and changes
nothing once done. A step type is stored by its ``type`` name, never by its class's module path:
:func:`register_step_type` maps the name to the class, and ``from_dict`` refuses unknown names.
Every built-in type is registered once :mod:`portal.pipeline.destinations.commit_steps` is imported.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pyspark.sql import DataFrame, SparkSession

from portal.pipeline import fs
from portal.pipeline.errors import ConfigError
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.properties import Properties


@dataclass
class WriterContext:
    """Where a branch of a task writes, and facts for sizing/partitioning."""

    spark: SparkSession
    jobspec: JobSpec
    task_id: str
    dataset_urn: str
    branch_index: int
    branch_name: str
    work_dir: str
    ingestion_time: dt.datetime
    estimated_input_bytes: int = 0


@dataclass
class WriteResult:
    output_dir: str | None = None
    output_files: list[dict[str, Any]] = field(default_factory=list)
    bytes_written: int = 0
    staging_table: str | None = None


class DataWriter(ABC):
    """Base class: validate configuration in ``__init__`` (before any read), write in :meth:`write`."""

    format = "CUSTOM"

    def __init__(self, props: Properties, ctx: WriterContext) -> None:
        self.props = props
        self.ctx = ctx

    @property
    def final_dir(self) -> str | None:
        return None

    @abstractmethod
    def write(self, df: DataFrame) -> WriteResult:
        """Write the branch's records to staging."""

    def abort(self) -> None:  # noqa: B027  (optional hook: most writers leave nothing behind)
        """Remove whatever a failed or unpublishable write left behind."""

    def _task_path(self, key: str, default_leaf: str) -> str:
        root = self.props.get(key) or fs.join(self.ctx.work_dir, default_leaf)
        spec = self.ctx.jobspec
        return fs.join(
            root, spec.job_name, str(spec.execution_id), self.ctx.task_id, f"branch_{self.ctx.branch_index}"
        )


_REGISTRY: dict[str, type[CommitStep]] = {}


def register_step_type(cls: type[CommitStep]) -> type[CommitStep]:
    """Make ``cls`` (with a ``type`` class attribute) loadable by :meth:`CommitStep.from_dict`."""
    _REGISTRY[cls.type] = cls
    return cls


def takes_user_node(step_type: str) -> bool:
    """Whether steps of this type keep a judged login's bounds (``user_node``,
    :mod:`portal.pipeline.usernode`) and connect by them."""
    return "user_node" in getattr(_REGISTRY.get(step_type), "FIELDS", ())


class CommitStep(ABC):
    """One idempotent publish action."""

    type: ClassVar[str] = ""

    @abstractmethod
    def verify(self) -> bool:
        """True when the step's effect is already in place."""

    @abstractmethod
    def execute(self) -> None:
        """Do the step (callers run it only when :meth:`verify` is False)."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """JSON form, with a ``type`` key."""

    @classmethod
    @abstractmethod
    def build(cls, data: Mapping[str, Any], properties: Mapping[str, str] | None) -> CommitStep:
        """Rebuild a step from its JSON form."""

    @staticmethod
    def from_dict(data: Mapping[str, Any], properties: Mapping[str, str] | None = None) -> CommitStep:
        """Rebuild a step; ``properties`` (the job's resolved properties) supply secrets."""
        step_type = data.get("type")
        cls = _REGISTRY.get(str(step_type))
        if cls is None:
            raise ConfigError(
                f"unknown commit step type '{step_type}' (known: {', '.join(sorted(_REGISTRY))}; "
                "register others with register_step_type)"
            )
        return cls.build(data, properties)


class SecretBearingStep(CommitStep):
    """A step stored as plain ``FIELDS`` whose one secret (a database or catalog password) is
    never stored: the step names the job property holding it (``password_property``), and
    :meth:`build` takes it from the job's resolved properties again."""

    FIELDS: ClassVar[tuple[str, ...]] = ()
    REQUIRED: ClassVar[tuple[str, ...]] = ()

    def __init__(self, data: Mapping[str, Any], password: str | None = None) -> None:
        missing = [k for k in self.REQUIRED if data.get(k) in (None, "")]
        if missing:
            raise ConfigError(f"{self.type} step is missing {', '.join(missing)}")
        self.data: dict[str, Any] = {k: data.get(k) for k in self.FIELDS}
        self.data["branch"] = int(self.data.get("branch") or 0)
        self.password = password

    @classmethod
    def build(cls, data: Mapping[str, Any], properties: Mapping[str, str] | None) -> CommitStep:
        key = data.get("password_property")
        return cls(data, (properties or {}).get(key) if key else None)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.data}
