"""Every commit step type a stored step may name, and the sequence that runs a dataset's steps.

The orchestration layer stores a dataset's steps as JSON in its CommitStepStore and rebuilds them
with :meth:`CommitStep.from_dict`, which finds the class by the step's ``type`` name. Importing this
module registers every built-in type — ``fs_rename`` (:mod:`~portal.pipeline.destinations.files`),
``fs_replace`` (:mod:`~portal.pipeline.destinations.files_replace`), ``jdbc_publish``
(:mod:`~portal.pipeline.destinations.jdbc`) and ``iceberg_commit``
(:mod:`~portal.pipeline.destinations.iceberg`) — so a step stored by any of them is read back. The
names, not the classes' module paths, are what the store holds: a class may move without a stored
step changing. ``high_watermark`` is the orchestration's own (its state store registers it with
:func:`register_step_type`).

:class:`CommitSequence` runs ``if not step.verify(): step.execute()`` for each step, so running it
again after a crash finishes the remaining steps and a second complete run changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from portal.pipeline.destinations.base import CommitStep, SecretBearingStep, register_step_type
from portal.pipeline.destinations.files import FsRenameCommitStep
from portal.pipeline.destinations.files_replace import FsReplaceCommitStep
from portal.pipeline.destinations.iceberg import IcebergCommitStep
from portal.pipeline.destinations.jdbc import JdbcPublishCommitStep

__all__ = [
    "BUILT_IN",
    "CommitSequence",
    "CommitStep",
    "FsRenameCommitStep",
    "FsReplaceCommitStep",
    "IcebergCommitStep",
    "JdbcPublishCommitStep",
    "SecretBearingStep",
    "register_step_type",
]

# The destinations' step types (each registered as its module was imported above).
BUILT_IN: tuple[type[CommitStep], ...] = (
    FsRenameCommitStep,
    FsReplaceCommitStep,
    JdbcPublishCommitStep,
    IcebergCommitStep,
)


class CommitSequence:
    """The steps of one dataset, run in order; safe to run again (each step is verified first)."""

    def __init__(self, steps: list[CommitStep], dataset_urn: str = "") -> None:
        self.steps = steps
        self.dataset_urn = dataset_urn

    @classmethod
    def from_dicts(
        cls,
        steps: list[Mapping[str, Any]],
        properties: Mapping[str, str] | None = None,
        dataset_urn: str = "",
    ) -> CommitSequence:
        return cls([CommitStep.from_dict(s, properties) for s in steps], dataset_urn)

    def run(self) -> int:
        """Execute every step not yet done; returns how many were executed."""
        executed = 0
        for step in self.steps:
            if not step.verify():
                step.execute()
                executed += 1
        return executed
