"""Each job attempt's logs, kept after the job under FLOWPORT_LOG_DIR/jobs:

- ``<executionId>/<job>.<attempt>.log``: the worker's own lines (attempt,
  watermarks, one line per task, recovery and commit, the outcome);
- ``<executionId>/<job>.<attempt>.driver.log``: the Spark driver's lines for
  this job — written by the worker's JVM through the log tag (see
  ``portal.pipeline.logtag`` and ``spark-log4j2.xml``), or the output of
  ``spark-submit`` for a cluster executor.

Their tails are stored on the JobExecution at every heartbeat and at the end,
so the status API and the log page show them from any host. Secret property
values the worker decrypted are masked everywhere the portal shows them: the
worker log as it is written; the driver log's stored tail as it is read; the
driver log file in place when the job ends, after which a ``.masked`` marker
beside it says the log page may show the file itself.
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from portal.keys.services import REDACTED
from portal.orchestration.models import JobExecution, JobStatus
from portal.orchestration.state import logview
from portal.pipeline.logtag import tag_thread

EXCERPT_CHARS = 4000
DRIVER_EXCERPT_CHARS = 16000
PAGE_CHARS = 2_000_000  # what the log page shows of one file
LIVE_PAGE_CHARS = 64_000  # ... while the page refreshes itself every 2 s
# Shorter values would mask unrelated text; every secret the portal creates is longer.
MIN_SECRET_CHARS = 4


def log_path(execution_id: int, job_name: str, attempt: int) -> Path:
    return Path(settings.FLOWPORT_LOG_DIR) / "jobs" / str(execution_id) / f"{job_name}.{attempt}.log"


def driver_log_path(execution_id: int, job_name: str, attempt: int) -> Path:
    return log_path(execution_id, job_name, attempt).with_suffix(".driver.log")


def masked_marker(driver_path: Path) -> Path:
    return driver_path.with_name(driver_path.name + ".masked")


def mask(text: str, secrets: Iterable[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):  # a secret inside a longer one
        text = text.replace(secret, REDACTED)
    return text


def read_tail(path: Path, chars: int) -> str:
    """The last `chars` characters of a file that may be large."""
    if not path.exists():
        return ""
    with path.open("rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - chars * 4))
        return fh.read().decode("utf-8", errors="replace")[-chars:]


class JobLog:
    def __init__(self, execution_id: int, job_name: str, attempt: int) -> None:
        self.path = log_path(execution_id, job_name, attempt)
        self.driver_path = driver_log_path(execution_id, job_name, attempt)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # spark-log4j2.xml names the driver log after the tag.
        self.tag = f"{execution_id}/{job_name}.{attempt}"
        self._lock = threading.Lock()
        self.secrets: set[str] = set()
        self._spark: Any = None
        # Records extracted by the tasks finished so far: the heartbeat stores
        # it as the job's processed count, so the count moves while it runs.
        self.records_so_far = 0

    def hide(self, values: Iterable[str]) -> None:
        """Mask these plaintexts wherever they would appear from now on."""
        self.secrets |= {v for v in values if len(v) >= MIN_SECRET_CHARS}

    def attach(self, spark: Any) -> None:
        """Tag the calling thread's Spark work with this job (its driver log)."""
        self._spark = spark
        tag_thread(spark, self.tag)

    def close(self) -> None:
        """Mask secrets in the driver log the JVM wrote, mark it safe to show,
        and untag the thread."""
        if self.driver_path.exists():
            if self.secrets:
                text = self.driver_path.read_text(encoding="utf-8", errors="replace")
                masked = mask(text, self.secrets)
                if masked != text:
                    # In place: the JVM's appender keeps appending to this file.
                    self.driver_path.write_text(masked, encoding="utf-8")
            masked_marker(self.driver_path).touch()
        if self._spark is not None:
            spark, self._spark = self._spark, None
            with contextlib.suppress(Exception):  # a stopped SparkContext: nothing to untag
                tag_thread(spark, None)

    def write(self, line: str, level: str = "INFO") -> None:
        """One line, `<time> <LEVEL> <text>` like the driver log's, so the
        log page filters both by level (portal.orchestration.state.logview)."""
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(f"{stamp} {level} {mask(line, self.secrets)}\n")

    def task_state(self, state: dict[str, Any]) -> None:
        """The pipeline's on_task_state callback: one line per finished task."""
        branches = ", ".join(
            f"{b['name']}={b['status']}/{b['records_written']}" for b in state.get("branches") or []
        )
        error = f" error: {state['error']}" if state.get("error") else ""
        failed = error or str(state.get("status", "")).upper() == "FAILED"
        with self._lock:
            self.records_so_far += int(state.get("records_extracted") or 0)
        self.write(
            f"task {state['task_id']} {state['dataset_urn']} {state['status']}: "
            f"{state.get('records_extracted', 0)} extracted, watermark "
            f"{state.get('low_watermark')} -> {state.get('actual_high_watermark')}"
            f"{f' [{branches}]' if branches else ''}{error}",
            "ERROR" if failed else "INFO",
        )
        if failed and state.get("traceback"):
            self.write(f"traceback of task {state['task_id']}:\n{state['traceback']}", "ERROR")

    def outcome(self, status: str, message: str, exc: BaseException | None = None) -> None:
        """The attempt's last line: how it ended and why; for a failure the
        traceback follows (its lines carry no level, so they stay with the
        ERROR line when the log page filters by level)."""
        level = {"FAILED": "ERROR", "CANCELLED": "WARN"}.get(status, "INFO")
        text = f"{status.lower()}: {message}"
        if exc is not None:
            text += "\n" + "".join(traceback.format_exception(exc)).rstrip()
        self.write(text, level)

    def fields(self) -> dict[str, str]:
        return {
            "log_excerpt": read_tail(self.path, EXCERPT_CHARS),
            # Masked before it is cut, so no secret is cut in half at the start.
            "driver_log_excerpt": mask(
                read_tail(self.driver_path, DRIVER_EXCERPT_CHARS + max(map(len, self.secrets), default=0)),
                self.secrets,
            )[-DRIVER_EXCERPT_CHARS:],
        }


@dataclass(frozen=True)
class LogSection:
    """One log of a job attempt as the log page shows it."""

    name: str
    text: str
    # False: only the tail is shown (a large file, or the file lives on another host).
    complete: bool
    path: Path
    kind: str = "worker"  # or "driver": the download link's ?log=


def attempt_logs(job: JobExecution, attempt: int, *, live: bool = False) -> list[LogSection]:
    """The worker and driver logs of one attempt: the files when this host
    can read them (FLOWPORT_LOG_DIR on the worker host, or shared) and they
    are masked, else the masked tails the worker stored on the job (which
    belong to its latest attempt once that attempt has started)."""
    stored = attempt == job.attempt  # a new attempt starts with no tails
    chars = LIVE_PAGE_CHARS if live else PAGE_CHARS
    sections = []
    for kind, (name, path, readable, excerpt) in _sources(job, attempt).items():
        if readable:
            text = read_tail(path, chars)
            sections.append(LogSection(name, text, path.stat().st_size <= len(text.encode()), path, kind))
        else:
            sections.append(LogSection(name, excerpt if stored else "", False, path, kind))
    return sections


def _sources(job: Any, attempt: int) -> dict[str, tuple[str, Path, bool, str]]:
    """Per log kind: its title, its file, whether this host may show the file
    (the driver log only once masked) and the stored tail to show instead."""
    args = (job.execution.execution_id, job.job_name, attempt)
    worker, driver = log_path(*args), driver_log_path(*args)
    return {
        "worker": ("Worker log", worker, worker.exists(), job.log_excerpt),
        "driver": ("Spark driver log", driver, masked_marker(driver).exists(), job.driver_log_excerpt),
    }


@dataclass(frozen=True)
class LogDownload:
    filename: str
    path: Path | None  # the whole file, when this host may serve it
    text: str  # else the stored tail (masked), possibly empty


def attempt_log_download(job: JobExecution, attempt: int, kind: str) -> LogDownload:
    """One attempt's worker or driver log to download: the whole (masked)
    file when this host can read it, else the masked tail the worker stored."""
    _title, path, readable, excerpt = _sources(job, attempt)[kind]
    execution = job.execution
    suffix = ".driver.log" if kind == "driver" else ".log"
    filename = f"{execution.flow_group}-{execution.flow_name}-{execution.execution_id}-{job.job_name}.{attempt}{suffix}"
    if readable:
        return LogDownload(filename, path, "")
    return LogDownload(filename, None, excerpt if attempt == job.attempt else "")


@dataclass(frozen=True)
class AttemptError:
    """Why an attempt failed, for the top of its log page: the message it
    ended with and the worker log's ERROR lines (each with its traceback)."""

    message: str
    lines: logview.FilteredLog  # the worker log's lines at ERROR and above


def attempt_error(job: JobExecution, attempt: int, sections: list[LogSection]) -> AttemptError | None:
    """The failure of this attempt, or None when it did not fail."""
    if attempt == job.attempt:
        status, message = job.status, job.message
    else:
        row = job.run_states.filter(attempt=attempt).values_list("status", "message").first()
        status, message = row or ("", "")
    if status != JobStatus.FAILED:
        return None
    worker = next((s.text for s in sections if s.kind == "worker"), "")
    return AttemptError(message, logview.apply(worker, logview.LogFilter(level="ERROR")))
