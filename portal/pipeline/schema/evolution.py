"""``schema.evolution.policy``: what a task does when its dataset's source schema drifted.

The state store keeps, with each dataset's watermark, the schema its last committed run delivered
(the TaskState's ``source_schema``, handed back as ``JobSpec.previous_schemas``).  Before anything
is read, the extract's schema is compared with it (:mod:`portal.pipeline.schema.drift`) and the
flow's policy decides:

* ``evolve``: new columns are delivered, widened types are delivered widened; a column the source
  no longer has is still delivered, as NULLs of its recorded type (readers of the recorded schema
  keep working). A JDBC destination adds the new columns and widens its columns at publish
  (:mod:`portal.pipeline.destinations.jdbc_evolution`); file destinations need nothing (each file carries
  its schema; read a folder with Spark's ``mergeSchema`` or any Parquet reader's schema union).
  A type change that is not a widening (``long`` -> ``string``) fails the dataset with the diff.
* ``freeze``: any change fails the dataset, the diff in the message; the recorded schema stays.
* ``discard_columns``: new columns are dropped, so the recorded schema is delivered as it was;
  a removed column or a changed type cannot be discarded and fails the dataset with the diff.

Unset (the default), nothing is enforced: the schema is still recorded every run, and
``SchemaCompatibilityPolicy`` (:mod:`portal.pipeline.quality`) remains available as a task policy.
The schema recorded for the next run is the one delivered, after the policy.
"""

from __future__ import annotations

import dataclasses
import json

from pyspark.sql import functions as F
from pyspark.sql import types as T

from portal.pipeline.errors import PipelineError
from portal.pipeline.properties import Properties
from portal.pipeline.schema.drift import DISCARD_COLUMNS, EVOLVE, FREEZE, POLICY_KEY, diff
from portal.pipeline.sources.base import Extraction


class SchemaDriftError(PipelineError):
    """The source schema changed in a way the flow's ``schema.evolution.policy`` refuses."""


def policy(props: Properties) -> str | None:
    """The job's policy (None: not enforced)."""
    return props.get_choice(POLICY_KEY)


def apply(extraction: Extraction, recorded: str | None, props: Properties, dataset_urn: str) -> Extraction:
    """The extraction the policy lets through (see the module docstring); raises
    :class:`SchemaDriftError` naming the dataset, the policy and the diff."""
    chosen = policy(props)
    if chosen is None or not recorded:
        return extraction
    current = extraction.df.drop(*extraction.helper_columns).schema
    drift = diff(recorded, current.json())
    if not drift:
        return extraction
    where = (
        f"{POLICY_KEY}={chosen}: the source schema of dataset '{dataset_urn}' changed since the recorded one"
    )
    if chosen == FREEZE:
        raise SchemaDriftError(f"{where}: {drift.describe()}")
    if chosen == DISCARD_COLUMNS and (drift.removed or drift.changed):
        raise SchemaDriftError(
            f"{where}: {drift.describe()}; discard_columns only drops new columns "
            "(a removed column or a changed type cannot keep the recorded schema)"
        )
    if chosen == EVOLVE and drift.incompatible:
        raise SchemaDriftError(f"{where}: {drift.describe()}; evolve only adds columns and widens types")
    df = extraction.df
    if chosen == DISCARD_COLUMNS:
        df = df.drop(*(name for name, _ in drift.added))
    else:
        kept = T.StructType.fromJson(json.loads(recorded))
        for name, _ in drift.removed:
            df = df.withColumn(name, F.lit(None).cast(kept[name].dataType))
    return dataclasses.replace(extraction, df=df, arrow=None)  # the scan no longer gives these rows
