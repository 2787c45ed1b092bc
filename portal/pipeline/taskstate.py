"""TaskState: what one task (one WorkUnit) did, as plain JSON-able data.

``run_job`` returns ``[TaskState.to_dict(), ...]``.  Keys of a TaskState dict:

``task_id``, ``job_name``, ``execution_id``, ``dataset_urn``, ``status`` (SUCCEEDED / FAILED /
CANCELLED), ``low_watermark``, ``expected_high_watermark``, ``actual_high_watermark`` (equal to the
expected high on success, the low watermark otherwise), ``records_extracted``, ``records_rejected``
(pre-fork row policies), ``branches`` (list of branch dicts, below), ``error`` (message or None), ``traceback`` (of a
failure, secrets masked, or None),
``timings`` (``started_at``/``finished_at`` ISO-8601 UTC, ``duration_seconds``), ``multi_work_unit``
(``id``, ``index`` of this work unit in it, ``size``, ``estimated_bytes`` of the group, ``groups``),
``work_unit`` (``range_index``, ``range_count``, ``estimated_bytes``, ``empty``), ``stage_progress``
(Spark ``jobs``, ``stages``, ``stages_completed``, ``tasks_total``, ``tasks_completed``,
``tasks_failed`` of the task's job group), ``quality``
(one dict per policy evaluated: ``policy``, ``type``, ``scope``, ``failed_records`` or ``passed``,
``message``), ``source_schema`` (Spark schema JSON of the extract, for the next run's schema check),
``err_dir`` (where pre-fork ERR_FILE rows went, or None), ``fork_feed`` (how several branches got
their records: ``one_pass`` — one read written by every branch, see :mod:`portal.pipeline.onepass` —
or ``per_branch`` — each branch re-read the bounded extract; ``direct`` — a single branch's Parquet
written by the Python workers from the Arrow extract, see :mod:`portal.pipeline.destinations.directwrite`; None
with a single branch otherwise),
``extract_staged`` (whether the extract was copied to Parquet before the branches read it: a live
source this task would have read twice, see :mod:`portal.pipeline.feed`), ``records_bad`` (rows a
CSV or JSON source could not read, set aside: :mod:`portal.pipeline.badrows`; not in
``records_extracted``), ``bad_records_files`` (where they are: beside each file branch's published
dataset, ``<dir>/_errors/<execution>-<task>.jsonl``, or the err folder's ``bad_records.jsonl`` when
the task failed on them or wrote neither files nor tables), ``bad_records_tables`` (the error tables
they are published to beside a JDBC or Iceberg destination: :mod:`portal.pipeline.destinations.badtables`).

A branch dict: ``index``, ``name``, ``status`` (SUCCEEDED / FAILED / CANCELLED / SKIPPED — SKIPPED
when the fork operator did not forward the schema to it), ``format``, ``records_written``,
``records_rejected`` (all row-policy failures in the branch, whatever their type),
``records_err_file`` (those written to the err folder), ``err_dir``, ``output_dir`` (task output
folder), ``output_files`` (list of ``{"path", "size"}`` under ``output_dir``), ``bytes_written``,
``staging_table`` (JDBC writer), ``bad_records`` (the task's bad records staged for the branch's
error table: ``staging_table`` or ``file``, and ``rows``), ``final_dir`` (``data.publisher.final.dir`` of the branch),
``error``, ``duration_seconds``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
CANCELLED = "CANCELLED"
SKIPPED = "SKIPPED"
RUNNING = "RUNNING"


@dataclass
class BranchState:
    """Outcome of one fork branch of one task."""

    index: int
    name: str
    status: str = RUNNING
    format: str = ""
    records_written: int = 0
    records_rejected: int = 0
    records_err_file: int = 0
    err_dir: str | None = None
    output_dir: str | None = None
    output_files: list[dict[str, Any]] = field(default_factory=list)
    bytes_written: int = 0
    staging_table: str | None = None
    bad_records: dict[str, Any] | None = None
    final_dir: str | None = None
    error: str | None = None
    duration_seconds: float = 0.0


@dataclass
class TaskState:
    """Outcome of one work unit; see the module docstring for the keys."""

    task_id: str
    job_name: str
    execution_id: int
    dataset_urn: str
    status: str = RUNNING
    low_watermark: str | None = None
    expected_high_watermark: str | None = None
    actual_high_watermark: str | None = None
    records_extracted: int = 0
    records_rejected: int = 0
    branches: list[BranchState] = field(default_factory=list)
    error: str | None = None
    traceback: str | None = None
    timings: dict[str, Any] = field(default_factory=dict)
    multi_work_unit: dict[str, Any] = field(default_factory=dict)
    work_unit: dict[str, Any] = field(default_factory=dict)
    stage_progress: dict[str, Any] = field(default_factory=dict)
    quality: list[dict[str, Any]] = field(default_factory=list)
    source_schema: str | None = None
    err_dir: str | None = None
    fork_feed: str | None = None
    extract_staged: bool = False
    records_bad: int = 0
    bad_records_files: list[str] = field(default_factory=list)
    bad_records_tables: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def fail(self, message: str) -> None:
        """Mark FAILED and roll the actual high watermark back to the low watermark."""
        self.status = FAILED
        self.error = self.error or message
        self.actual_high_watermark = self.low_watermark
