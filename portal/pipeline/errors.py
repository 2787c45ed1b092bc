"""Errors of the pipeline runtime.

Every error raised on purpose is a :class:`PipelineError` whose message is written for the user who
configured the job (which key, which branch, what is wrong). The task runner turns it into the
``error`` of a FAILED TaskState verbatim; other exceptions (Spark, JDBC) are shortened and redacted.
"""

from __future__ import annotations


class PipelineError(Exception):
    """A failure with a message that is safe and useful to show to the job's owner."""


class ConfigError(PipelineError):
    """A property is missing, malformed or names something that does not exist."""


class MissingPropertyError(ConfigError):
    """A required property is absent; the message names the exact key that was read and the branch."""


class ClassLoadError(ConfigError):
    """A dotted class path (converter, policy, fork operator, source, writer) cannot be loaded."""


class ForkBranchMismatchError(PipelineError):
    """A fork operator's schema/record decisions do not have one entry per branch."""


class QualityCheckError(PipelineError):
    """A FAIL row policy or FAILED task policy did not pass."""


class CommitConflictError(PipelineError):
    """A commit step's target already holds different content; it is never overwritten silently."""


class CancelledError(PipelineError):
    """The job was cancelled before this work unit ran to completion."""
