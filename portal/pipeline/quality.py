"""Quality checkers: row-level and task-level policies (Gobblin's ``qualitychecker.*`` keys).

Row policies — ``qualitychecker.row.policies`` (dotted class paths; bare names resolve to this
module) with ``qualitychecker.row.policy.types`` (same length) — are Spark boolean expressions,
evaluated in the writer's single pass.  A row failing a policy is handled by the first failing
policy's type:

* ``FAIL``: the row is counted and the task (branch) fails after the pass; nothing is published.
* ``ERR_FILE``: the row is left out of the output and written, with a ``_reject_reason`` column
  naming the policy, as JSON lines to the err folder (``qualitychecker.row.err.file``, default
  ``<work_dir>/err/<job>/<execution>/<task>/<branch>``).
* ``OPTIONAL``: the row is left out of the output and counted, nothing else — Gobblin's behaviour
  (an OPTIONAL policy never fails the task, but a row that fails it is not written).

All failures are counted per policy in TaskState ``quality`` and in ``records_rejected``.  A policy
expression that evaluates to NULL counts as a failure; the built-ins below treat a NULL field as
passing except ``NotNullPolicy``:

* ``NotNullPolicy``: ``qualitychecker.row.notnull.fields = a,b``
* ``RegexPolicy``: ``qualitychecker.row.regex.field``, ``qualitychecker.row.regex.pattern``
* ``RangePolicy``: ``qualitychecker.row.range.field``, ``qualitychecker.row.range.min`` / ``.max``

Task policies — ``qualitychecker.task.policies`` / ``qualitychecker.task.policy.types`` (``FAILED``
or ``OPTIONAL``; ``FAIL`` is accepted for ``FAILED``) — look at the task as a whole, before the
write (schema) and after it (counts).  A FAILED one fails the task; an OPTIONAL one is only
reported.  Built-ins:

* ``RowCountPolicy``: records (extracted pre-fork, written in a branch) >= ``qualitychecker.task.rowcount.min``
  (default 1), and <= ``qualitychecker.task.rowcount.max`` if set.
* ``SchemaCompatibilityPolicy``: the extracted schema can be read by consumers of the previous run's
  (``JobSpec.previous_schemas[dataset_urn]``): no column removed, no type changed except widening
  (int -> bigint, float -> double, decimal precision up); new columns are fine.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from portal.pipeline.classloading import load_class
from portal.pipeline.errors import ConfigError
from portal.pipeline.properties import Properties

PREFIX = "portal.pipeline.quality."
ROW_TYPES = ("FAIL", "ERR_FILE", "OPTIONAL")
TASK_TYPES = ("FAILED", "OPTIONAL")
REASON = "_reject_reason"
_INDEX = "fp_reject_index"


class RowPolicy(ABC):
    """Base class of row policies; :meth:`condition` is True for a good row."""

    def __init__(self, props: Properties, policy_type: str) -> None:
        self.props = props
        self.type = policy_type

    @property
    def name(self) -> str:
        return type(self).__name__

    @abstractmethod
    def condition(self, df: DataFrame) -> Column:
        """True for a row that passes."""

    def _field(self, df: DataFrame, key: str) -> str:
        name = self.props.require(key)
        if name not in df.columns:
            raise ConfigError(f"{self.name}: field '{name}' ({self.props.describe(key)}) does not exist")
        return name


class NotNullPolicy(RowPolicy):
    def condition(self, df: DataFrame) -> Column:
        names = self.props.get_list("qualitychecker.row.notnull.fields")
        if not names:
            self.props.require("qualitychecker.row.notnull.fields")
        missing = [n for n in names if n not in df.columns]
        if missing:
            raise ConfigError(f"NotNullPolicy: field(s) {', '.join(missing)} do not exist")
        cond = F.lit(True)
        for name in names:
            cond = cond & F.col(name).isNotNull()
        return cond


class RegexPolicy(RowPolicy):
    def condition(self, df: DataFrame) -> Column:
        name = self._field(df, "qualitychecker.row.regex.field")
        pattern = self.props.require("qualitychecker.row.regex.pattern")
        column = F.col(name).cast("string")
        return column.isNull() | column.rlike(pattern)


class RangePolicy(RowPolicy):
    def condition(self, df: DataFrame) -> Column:
        name = self._field(df, "qualitychecker.row.range.field")
        low = self.props.get_float("qualitychecker.row.range.min")
        high = self.props.get_float("qualitychecker.row.range.max")
        cond = F.lit(True)
        if low is not None:
            cond = cond & (F.col(name) >= F.lit(low))
        if high is not None:
            cond = cond & (F.col(name) <= F.lit(high))
        return F.col(name).isNull() | cond


def _types(props: Properties, key: str, count: int, allowed: tuple[str, ...]) -> list[str]:
    types = [t.upper() for t in props.get_list(key)]
    types = ["FAILED" if t == "FAIL" and "FAILED" in allowed else t for t in types]
    if len(types) != count:
        raise ConfigError(f"{props.describe(key)} must list one type per policy ({count}), got {len(types)}")
    for t in types:
        if t not in allowed:
            raise ConfigError(
                f"{props.describe(key)}: unknown policy type '{t}' (allowed: {', '.join(allowed)})"
            )
    return types


class RowChecker:
    """The row policies of one stream, compiled to a reject-index column plus counters."""

    def __init__(self, props: Properties) -> None:
        paths = props.get_list("qualitychecker.row.policies")
        types = _types(props, "qualitychecker.row.policy.types", len(paths), ROW_TYPES)
        self.policies: list[RowPolicy] = []
        for path, ptype in zip(paths, types, strict=True):
            full = path if "." in path else PREFIX + path
            cls = load_class(full, props.describe("qualitychecker.row.policies"), RowPolicy)
            self.policies.append(cls(props, ptype))

    @property
    def active(self) -> bool:
        return bool(self.policies)

    @property
    def has_err_file(self) -> bool:
        return any(p.type == "ERR_FILE" for p in self.policies)

    def tag(self, df: DataFrame) -> DataFrame:
        """Add the index of the first failing policy (NULL for a good row)."""
        if not self.policies:
            return df
        index: Column = F.lit(None).cast("int")
        for i, policy in reversed(list(enumerate(self.policies))):
            index = F.when(~F.coalesce(policy.condition(df), F.lit(False)), F.lit(i)).otherwise(index)
        return df.withColumn(_INDEX, index)

    def metrics(self, prefix: str) -> dict[str, Column]:
        return {
            f"{prefix}{i}": F.sum(F.when(F.col(_INDEX) == i, 1).otherwise(0))
            for i in range(len(self.policies))
        }

    def good(self, df: DataFrame) -> DataFrame:
        return df.where(F.col(_INDEX).isNull()).drop(_INDEX) if self.policies else df

    def err_rows(self, df: DataFrame) -> DataFrame:
        """Rows to write to the err folder, with the failing policy's name."""
        err = [i for i, p in enumerate(self.policies) if p.type == "ERR_FILE"]
        names = F.element_at(F.array(*[F.lit(p.name) for p in self.policies]), F.col(_INDEX) + 1)
        return df.where(F.col(_INDEX).isin(err)).withColumn(REASON, names).drop(_INDEX)

    def outcome(
        self, values: dict[str, Any], prefix: str, scope: str
    ) -> tuple[list[dict[str, Any]], int, int, str | None]:
        """Reports per policy, rejected count, err-file count, and the FAIL message (if any)."""
        reports, rejected, err, failure = [], 0, 0, None
        for i, policy in enumerate(self.policies):
            count = int(values.get(f"{prefix}{i}") or 0)
            rejected += count
            if policy.type == "ERR_FILE":
                err += count
            if policy.type == "FAIL" and count and failure is None:
                failure = f"row policy {policy.name} (FAIL) failed on {count} record(s) in {scope}"
            reports.append(
                {"policy": policy.name, "type": policy.type, "scope": scope, "failed_records": count}
            )
        return reports, rejected, err, failure


@dataclass
class TaskCheckContext:
    """What a task policy sees; ``records`` is None before the write."""

    dataset_urn: str
    scope: str
    schema: T.StructType
    previous_schema: T.StructType | None
    records: int | None


class TaskPolicy:
    """Base class of task policies: return None when passing, else a message."""

    def __init__(self, props: Properties, policy_type: str) -> None:
        self.props = props
        self.type = policy_type

    @property
    def name(self) -> str:
        return type(self).__name__

    def before_write(self, ctx: TaskCheckContext) -> str | None:
        return None

    def after_write(self, ctx: TaskCheckContext) -> str | None:
        return None


class RowCountPolicy(TaskPolicy):
    def after_write(self, ctx: TaskCheckContext) -> str | None:
        low = self.props.get_int("qualitychecker.task.rowcount.min", 1) or 0
        high = self.props.get_int("qualitychecker.task.rowcount.max")
        records = ctx.records or 0
        if records < low:
            return f"RowCountPolicy: {records} record(s) in {ctx.scope}, fewer than the minimum {low}"
        if high is not None and records > high:
            return f"RowCountPolicy: {records} record(s) in {ctx.scope}, more than the maximum {high}"
        return None


_WIDENING = {
    ("byte", "short"),
    ("byte", "int"),
    ("byte", "bigint"),
    ("short", "int"),
    ("short", "bigint"),
    ("int", "bigint"),
    ("float", "double"),
    ("date", "timestamp"),
}


def _compatible(old: T.DataType, new: T.DataType) -> bool:
    if old == new:
        return True
    if isinstance(old, T.DecimalType) and isinstance(new, T.DecimalType):
        return new.scale >= old.scale and (new.precision - new.scale) >= (old.precision - old.scale)
    if isinstance(old, T.StructType) and isinstance(new, T.StructType):
        return not schema_problems(old, new)
    return (old.simpleString(), new.simpleString()) in _WIDENING


def schema_problems(old: T.StructType, new: T.StructType) -> list[str]:
    """Why ``new`` cannot replace ``old`` (empty when compatible)."""
    current = {f.name: f.dataType for f in new.fields}
    problems = []
    for f in old.fields:
        if f.name not in current:
            problems.append(f"column '{f.name}' was removed")
        elif not _compatible(f.dataType, current[f.name]):
            problems.append(
                f"column '{f.name}' changed type from {f.dataType.simpleString()} to {current[f.name].simpleString()}"
            )
    return problems


def parse_schema(text: str | None) -> T.StructType | None:
    if not text:
        return None
    data = json.loads(text)
    return T.StructType.fromJson(data) if isinstance(data, dict) else None


class SchemaCompatibilityPolicy(TaskPolicy):
    def before_write(self, ctx: TaskCheckContext) -> str | None:
        if ctx.previous_schema is None:
            return None
        problems = schema_problems(ctx.previous_schema, ctx.schema)
        if problems:
            return (
                f"source schema of dataset '{ctx.dataset_urn}' changed incompatibly since the previous run: "
                + "; ".join(problems)
            )
        return None


def build_task_policies(props: Properties) -> list[TaskPolicy]:
    paths = props.get_list("qualitychecker.task.policies")
    types = _types(props, "qualitychecker.task.policy.types", len(paths), TASK_TYPES)
    result = []
    for path, ptype in zip(paths, types, strict=True):
        full = path if "." in path else PREFIX + path
        cls = load_class(full, props.describe("qualitychecker.task.policies"), TaskPolicy)
        result.append(cls(props, ptype))
    return result


def run_task_policies(
    policies: list[TaskPolicy], ctx: TaskCheckContext, phase: str, reports: list[dict[str, Any]]
) -> str | None:
    """Evaluate one phase; append reports; return the first FAILED policy's message."""
    failure = None
    for policy in policies:
        message = policy.before_write(ctx) if phase == "before" else policy.after_write(ctx)
        if message is None and phase == "before":
            continue
        reports.append(
            {
                "policy": policy.name,
                "type": policy.type,
                "scope": ctx.scope,
                "passed": message is None,
                "message": message,
            }
        )
        if message and policy.type == "FAILED" and failure is None:
            failure = message
    return failure
