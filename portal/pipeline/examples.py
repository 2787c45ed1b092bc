"""Gobblin's fork-operator example, ported: route records with sensitive data to branch 0.

``SensitiveDataAwareForkOperator`` has two branches: branch 0 gets the records in which any field
listed in ``fork.sensitive.fields`` is non-null (they are then purged by ``PurgeFieldsConverter`` and
checked by a ``NotNullPolicy`` of type FAIL in branch 0), branch 1 the others.  The schema goes to
both.  See docs/pipeline.md for the full job configuration.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from portal.pipeline.errors import ConfigError
from portal.pipeline.fork import ForkOperator


class SensitiveDataAwareForkOperator(ForkOperator):
    NUM_BRANCHES = 2

    def get_branches(self) -> int:
        return self.NUM_BRANCHES

    def fork_schema(self, schema: T.StructType) -> list[bool]:
        return [True, True]

    def fork_data_records(self, schema: T.StructType) -> list[Column | bool]:
        fields = self.props.get_list("fork.sensitive.fields")
        if not fields:
            self.props.require("fork.sensitive.fields")
        missing = [f for f in fields if f not in schema.fieldNames()]
        if missing:
            raise ConfigError(f"fork.sensitive.fields: field(s) {', '.join(missing)} do not exist")
        sensitive = F.lit(False)
        for name in fields:
            sensitive = sensitive | F.col(name).isNotNull()
        return [sensitive, ~sensitive]
