"""How a destination takes a run's rows: ``writer.write.mode`` (one key for files, JDBC and Iceberg).

* ``append`` (default): the rows are added.
* ``overwrite``: a full refresh; the run's rows replace the dataset in one step readers never see
  half of (one database transaction, one Iceberg commit, one folder exchange for files).
* ``merge``: an upsert on ``extract.primary.key.fields``: the run's rows replace stored rows of the
  same key (the latest of the run by the first ``extract.delta.fields`` winning), new keys are
  added; with ``writer.merge.delete.column`` a run's row whose column is true deletes its key.
* ``history``: slowly changing dimension type 2, as dlt's ``scd2``: per key, a changed row closes
  the current version (``valid_to`` set, ``is_current`` false) and a new current version is added
  with ``valid_from`` the publish time; unchanged rows change nothing; a deleted key (the delete
  column) is closed.

The older per-destination keys still work: ``writer.jdbc.write.mode=upsert`` and
``writer.iceberg.write.mode=merge`` mean ``merge``. Every mode is one idempotent commit step, so a
crash between publish steps is finished exactly once by running the steps again.

:func:`backfill_replacement` says in words what a backfill replaces under each mode (the backfill
page shows it; :mod:`~portal.pipeline.destinations.commitplan` plans it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from portal.pipeline import backfills
from portal.pipeline.errors import ConfigError
from portal.pipeline.properties import Properties

MODES = ("append", "overwrite", "merge", "history")
KEYED = ("merge", "history")
REPLACING = ("overwrite", "merge", "history")
VALID_FROM, VALID_TO, IS_CURRENT = "valid_from", "valid_to", "is_current"
HISTORY_COLUMNS = (VALID_FROM, VALID_TO, IS_CURRENT)
# File formats a merge or history can read back and rewrite (through Arrow).
REWRITABLE_FILE_FORMATS = ("PARQUET", "CSV")
KEY = "writer.write.mode"
PRIMARY_KEY = "extract.primary.key.fields"


@dataclass(frozen=True)
class WriteMode:
    mode: str = "append"
    keys: list[str] = field(default_factory=list)
    order: str | None = None
    delete_column: str | None = None

    def step_fields(self) -> dict[str, object]:
        """What a commit step carries of it (keys only where the mode uses them)."""
        keyed = self.mode in KEYED
        return {
            "write_mode": self.mode,
            "merge_keys": list(self.keys) if keyed else [],
            "merge_order": self.order if keyed else None,
            "delete_column": self.delete_column if keyed else None,
        }


def _legacy(props: Properties) -> tuple[str, str] | None:
    """(key, mode) of a per-destination key that asks for a merge."""
    for key, wanted in (("writer.jdbc.write.mode", "upsert"), ("writer.iceberg.write.mode", "merge")):
        if (props.get(key) or "").lower() == wanted:
            return key, "merge"
    return None


def resolve(props: Properties, fmt: str) -> WriteMode:
    """The branch's write mode for destination format ``fmt`` (JDBC, ICEBERG or a file format);
    a ConfigError naming the key for what the destination cannot do."""
    named = (props.get(KEY) or "").strip().lower()
    key, word = props.describe(KEY), named
    if named:
        mode = named
    elif legacy := _legacy(props):
        key, mode = props.describe(legacy[0]), legacy[1]
        word = (props.get(legacy[0]) or "").lower()
    else:
        mode = "append"
    if mode not in MODES:
        raise ConfigError(f"{key} must be one of {', '.join(MODES)}, got '{mode}'")
    keys = props.get_list("extract.primary.key.fields")
    if mode in KEYED and not keys:
        raise ConfigError(f"{key}: {word} needs extract.primary.key.fields (the merge keys)")
    fmt = (fmt or "PARQUET").upper()
    if fmt not in ("JDBC", "ICEBERG"):
        if mode in KEYED and fmt not in REWRITABLE_FILE_FORMATS:
            raise ConfigError(
                f"{key}: {mode} of a files destination rewrites the dataset and reads "
                f"{' or '.join(REWRITABLE_FILE_FORMATS)} only, not {fmt}"
            )
        if mode in KEYED and props.get_list("writer.partition.columns"):
            raise ConfigError(
                f"{key}: {mode} of a files destination rewrites the whole dataset; it takes no "
                "writer.partition.columns"
            )
        if mode in REPLACING and not props.get_bool("data.publisher.dataset.subdir", True):
            raise ConfigError(
                f"{key}: {mode} replaces the dataset's own folder; data.publisher.dataset.subdir "
                "must be true (else the datasets would replace each other)"
            )
    order = props.get_list("extract.delta.fields")
    return WriteMode(mode, keys, order[0] if order else None, props.get("writer.merge.delete.column") or None)


def problems(props: Properties, fmt: str) -> list[str]:
    """:func:`resolve`'s refusal, for the checks made before a job runs."""
    try:
        resolve(props, fmt)
    except ConfigError as error:
        return [str(error)]
    return []


def backfill_replacement(
    properties: Mapping[str, str], kind: str, urn: str, low: str | None, high: str, stored: str | None = None
) -> str:
    """What a backfill of ``urn`` does at a destination of ``kind`` (files, jdbc, iceberg);
    ``stored``: the dataset's watermark now."""
    props = Properties({k: v for k, v in properties.items() if isinstance(v, str)})
    fmt = {"jdbc": "JDBC", "iceberg": "ICEBERG"}.get(kind) or props.get("writer.output.format") or "PARQUET"
    try:
        mode = resolve(props, fmt).mode
    except Exception:  # a refusal the save reports; the page only describes
        mode = "append"
    span = f"({low or 'the first record'}, {high}]"
    if mode == "merge":
        return f"merged by key: the rows read again replace their stored versions of {urn}"
    if mode == "history":
        return f"history: a new version for each key of {urn} whose row changed"
    if mode == "overwrite":
        return f"{urn} is replaced whole by the rows of {span}"
    if kind == "jdbc":
        order = props.get_list("extract.delta.fields")
        column = order[0] if order else None
        if column:
            return f"the rows of {urn} with {column} in {span} are deleted and read again"
        return f"appended: {urn} has no watermark column to replace a range by"
    if kind == "iceberg":
        return f"appended to {urn}: choose the merge write mode to replace rows by key"
    if props.get_list("writer.partition.columns"):
        return f"the partitions of {urn} that the rows of {span} fall in are replaced"
    if backfills.covers_everything(low, high, stored):
        return f"{urn} is replaced whole: the range reads every load again"
    return (
        f"the files of {urn} that the loads of {span} published are replaced by the rows read again "
        "(a bound inside a load is moved to that load's edge)"
    )
