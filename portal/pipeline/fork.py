"""The ForkOperator (``fork.operator.class``): which branches get the schema and which get each record.

Contract (Gobblin's, on DataFrames): :meth:`ForkOperator.get_branches` is the number of branches;
:meth:`ForkOperator.fork_schema` returns one bool per branch (False: the branch gets nothing and is
reported SKIPPED); :meth:`ForkOperator.fork_data_records` returns one boolean Spark ``Column`` (or a
Python bool) per branch — a record goes to every branch whose expression is true, so the decision
is made per record by Spark, natively.  Lists of the wrong length fail the task with
:class:`~portal.pipeline.errors.ForkBranchMismatchError`.

Copies: each branch gets its own lazy DataFrame derived from the same bounded extract, so a branch
can never alter another's records (Gobblin's Copyable requirement is free here).

Built-ins: :class:`IdentityForkOperator` (default; every record to all ``fork.branches`` branches)
and :class:`RouteByFieldForkOperator` (``fork.route.field`` and ``fork.route.values.N`` — a record
goes to the branches listing its value; ``*`` in a branch's list takes the records no other branch
listed).  Gobblin's sensitive-data example is :mod:`portal.pipeline.examples`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TypeVar

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from portal.pipeline.classloading import load_class
from portal.pipeline.errors import ConfigError, ForkBranchMismatchError
from portal.pipeline.properties import Properties

Decision = TypeVar("Decision")

DEFAULT_OPERATOR = "portal.pipeline.fork.IdentityForkOperator"


class ForkOperator(ABC):
    """Base class; ``props`` is the pre-fork (job-level) view."""

    def __init__(self, props: Properties) -> None:
        self.props = props

    def get_branches(self) -> int:
        branches = self.props.get_int("fork.branches", 1) or 1
        if branches < 1:
            raise ConfigError("fork.branches must be at least 1")
        return branches

    def fork_schema(self, schema: T.StructType) -> list[bool]:
        return [True] * self.get_branches()

    @abstractmethod
    def fork_data_records(self, schema: T.StructType) -> list[Column | bool]:
        """Per branch: whether (or for which records) it gets the record."""


class IdentityForkOperator(ForkOperator):
    """Every record to every branch."""

    def fork_data_records(self, schema: T.StructType) -> list[Column | bool]:
        return [True] * self.get_branches()


class RouteByFieldForkOperator(ForkOperator):
    """Route records by the value of ``fork.route.field`` (values compared as strings)."""

    def fork_data_records(self, schema: T.StructType) -> list[Column | bool]:
        field = self.props.require("fork.route.field")
        if field not in schema.fieldNames():
            raise ConfigError(
                f"fork.route.field: field '{field}' does not exist (fields: {', '.join(schema.fieldNames())})"
            )
        value = F.col(field).cast("string")
        lists = [self.props.get_list(f"fork.route.values.{i}") for i in range(self.get_branches())]
        listed = sorted({v for values in lists for v in values if v != "*"})
        result: list[Column | bool] = []
        for values in lists:
            explicit = [v for v in values if v != "*"]
            cond = value.isin(explicit) if explicit else F.lit(False)
            if "*" in values:
                cond = cond | value.isNull() | ~value.isin(listed)
            result.append(cond)
        return result


def build_fork_operator(props: Properties) -> ForkOperator:
    path = props.get("fork.operator.class") or DEFAULT_OPERATOR
    cls: type[ForkOperator] = load_class(path, "fork.operator.class", ForkOperator)
    return cls(props)


def checked(operator: ForkOperator, decisions: list[Decision], what: str) -> list[Decision]:
    """Enforce one decision per branch (ForkBranchMismatchException in Gobblin)."""
    branches = operator.get_branches()
    if len(decisions) != branches:
        raise ForkBranchMismatchError(
            f"fork branch mismatch: {type(operator).__name__}.{what} returned {len(decisions)} value(s) "
            f"but get_branches() is {branches}"
        )
    return decisions


def as_column(decision: Column | bool) -> Column:
    return decision if isinstance(decision, Column) else F.lit(bool(decision))
