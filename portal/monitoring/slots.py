"""A change-data-capture flow's replication slot, as an operator needs to see it: how far behind it is
and how much log the source server keeps for it, and alerts when that goes wrong.

The slot lives on the flow's source server (``portal.pipeline.cdc.pg``), so each look costs a
connection there: the flow page asks for it in a fragment of its own (never the flow list), the
reading is cached for ``CDC_SLOT_CACHE_SECONDS``, and the monitor reads each capturing flow's slot at
most every ``CDC_SLOT_INTERVAL_SECONDS`` with a short connect and statement timeout.

*Lag* is measured from what the destinations hold, the lowest log position every captured table
of every destination committed (their watermarks; the lagging destination's): bytes of log written since, and seconds since the run that read up to it
started (0 when the server wrote nothing since). *WAL retained* is what the server keeps for the
slot (from its restart position), whatever the destination holds. A slot is *inactive* when no run
of the flow started for ``CDC_SLOT_INACTIVE_SECONDS`` (a paused or stuck flow whose slot keeps log).
A slot *lost* on the server (``wal_status = lost`` after ``max_slot_wal_keep_size``, or dropped while
the tables have positions) fails the flow's runs until its owner asks for a new snapshot.

Each condition raises its event once per episode (``cdc.slot_lagging``, ``cdc.slot_inactive``,
``cdc.slot_lost``) and ``cdc.slot_ok`` when it clears: the dedupe key carries the episode's number,
the count of the condition's earlier clearances, so several schedulers raise each event once.
Thresholds are the flow's properties ``source.cdc.alert.lag.bytes``, ``source.cdc.alert.lag.seconds``
and ``source.cdc.alert.inactive.seconds`` (0 turns one off), defaulting to the settings.

A MariaDB flow has no slot: its card and the monitor read the server's binlog against the lowest
position every table committed (:mod:`portal.pipeline.cdc.binlog_lag`) over the same short timeout and
cache, and raise the same ``cdc.slot_lagging`` / ``cdc.slot_ok``; a position in binlog files the
server no longer has (expired or purged) is ``cdc.slot_lost``. Nothing is kept for the flow on such a
server, so there is no *inactive* condition (a stopped flow costs the server nothing, but may see its
position expire: that is the *lost* alert).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Max, Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from portal.events.models import Event
from portal.events.services import raise_event
from portal.flows.models import FlowConfig
from portal.orchestration.control.cdc import (
    binlog_capture_of,
    binlog_connection,
    capture_of,
    capturing_hops,
    source_connection,
)
from portal.orchestration.models import DatasetState, FlowExecution
from portal.pipeline.cdc import binlog_lag
from portal.pipeline.cdc import mysql as cdc_mysql
from portal.pipeline.cdc import pg as cdc_pg
from portal.pipeline.cdc.pgoutput import parse_lsn
from portal.pipeline.cdc.snapshot import split as split_progress
from portal.pipeline.cdc.snapshot import stream_position
from portal.pipeline.properties import Properties
from portal.pipeline.propertyrules import CDC_SOURCE_CLASS

logger = logging.getLogger(__name__)

LAGGING, INACTIVE, LOST, OK = "cdc.slot_lagging", "cdc.slot_inactive", "cdc.slot_lost", "cdc.slot_ok"
CONDITIONS = (LOST, LAGGING, INACTIVE)
LAG_BYTES_KEY = "source.cdc.alert.lag.bytes"
LAG_SECONDS_KEY = "source.cdc.alert.lag.seconds"
INACTIVE_KEY = "source.cdc.alert.inactive.seconds"


@dataclass
class SlotReport:
    """One reading of a flow's slot. ``status``: ``ok``, ``lagging``, ``inactive``, ``lost``,
    ``missing`` (dropped on the server while the tables have positions), ``new`` (the first run
    creates it) or ``unreachable``; ``problems`` the alert kinds that hold now."""

    slot: str
    status: str
    message: str
    read_at: datetime
    lag_bytes: int | None = None
    lag_seconds: float | None = None
    retained_bytes: int | None = None
    safe_wal_bytes: int | None = None
    wal_status: str | None = None
    active: bool = False
    caught_up_at: datetime | None = None
    last_run_at: datetime | None = None
    problems: list[str] = field(default_factory=list)
    kind: str = "slot"  # or "binlog": a MariaDB flow, which keeps no slot
    lag_transactions: int | None = None  # binlog GTID positions: transactions behind
    lag_bytes_exact: bool = True  # False: at most this many (a GTID position, counted by file)
    position: str | None = None  # binlog: the lowest position the tables committed
    server_position: str | None = None
    oldest_binlog: str | None = None
    snapshots: list[str] = field(default_factory=list)  # the chunked snapshots under way

    @property
    def what(self) -> str:
        return f"replication slot {self.slot}" if self.kind == "slot" else "the binlog position"

    @property
    def needs_resnapshot(self) -> bool:
        return self.status in ("lost", "missing")


@dataclass(frozen=True)
class Thresholds:
    lag_bytes: int
    lag_seconds: int
    inactive_seconds: int


def thresholds(props: dict[str, str]) -> Thresholds:
    """The flow's alert thresholds (its properties, else the settings); 0 turns one off."""

    def pick(key: str, default: int) -> int:
        try:
            return max(0, int(props.get(key, default)))
        except (TypeError, ValueError):  # refused on save; an older flow keeps the default
            return default

    return Thresholds(
        pick(LAG_BYTES_KEY, settings.CDC_ALERT_LAG_BYTES),
        pick(LAG_SECONDS_KEY, settings.CDC_ALERT_LAG_SECONDS),
        pick(INACTIVE_KEY, settings.CDC_ALERT_INACTIVE_SECONDS),
    )


def capturing_flows() -> QuerySet[FlowConfig]:
    """The flows whose first hop may read the cdc source (their properties or compiled DAG name it):
    an index-free containment filter on JSON, read only by the monitor, once per interval. SQLite (the
    embedded portal) has no JSON containment: there it is the class's name anywhere in the JSON text,
    a few flows more at most, which :func:`read` passes over (their first hop captures nothing)."""
    flows = FlowConfig.objects.select_related("compiled_dag")
    if connection.features.supports_json_field_contains:
        return flows.filter(
            Q(properties__contains={"source.class": CDC_SOURCE_CLASS})
            | Q(compiled_dag__dag__contains={"jobs": [{"properties": {"source.class": CDC_SOURCE_CLASS}}]})
        )
    return flows.alias(
        properties_text=Cast("properties", TextField()), dag_text=Cast("compiled_dag__dag", TextField())
    ).filter(Q(properties_text__contains=CDC_SOURCE_CLASS) | Q(dag_text__contains=CDC_SOURCE_CLASS))


def _states(flow: FlowConfig, props: dict[str, str]) -> tuple[set[tuple[str, str]], list[tuple[Any, ...]]]:
    """Which (job, table) pairs must hold a position, one per captured table of each destination
    (each destination's job keeps its own), and the committed watermarks of those pairs as
    ``((job, table), watermark, execution id, updated)``."""
    tables = Properties(props).get_list("source.cdc.tables")
    hops = capturing_hops(flow)
    wanted = {(job, t) for job, captured in hops for t in captured} or {("", t) for t in tables}
    states = DatasetState.objects.filter(flow_id=flow.pk, dataset_urn__in={t for _, t in wanted})
    if hops:
        states = states.filter(job_name__in={job for job, _ in hops})
    rows = [
        ((job if hops else "", urn), mark, run, updated)
        for job, urn, mark, run, updated in states.exclude(watermark="")
        .order_by("dataset_urn", "job_name")
        .values_list("job_name", "dataset_urn", "watermark", "execution_id", "updated")
    ]
    return wanted, rows


def _marks(flow: FlowConfig, props: dict[str, str]) -> list[tuple[str, str, int | None, datetime]]:
    """The committed stream positions (a snapshot's progress left out) of every captured table of
    every destination: ``(table, position, execution id, updated)``; empty unless each has one."""
    wanted, rows = _states(flow, props)
    if not wanted or {where for where, *_ in rows} != wanted:
        return []
    return [(where[1], stream_position(mark) or "", run, updated) for where, mark, run, updated in rows]


def _snapshots(flow: FlowConfig, props: dict[str, str]) -> list[str]:
    """The captured tables whose snapshot in key chunks is under way, and how far it got (for each
    destination's job, when the flow has several)."""
    wanted, rows = _states(flow, props)
    several = len({job for job, _ in wanted}) > 1
    found = []
    for (job, urn), mark, _run, _updated in rows:
        try:
            progress = split_progress(mark)[1]
        except ValueError:
            continue
        if progress is not None:
            after = ", ".join(str(k) for k in progress.after or []) or "the start"
            where = f"{urn} ({job})" if several else urn
            found.append(f"{where}: {progress.rows:,} rows read so far, up to key ({after})")
    return found


def _started(flow: FlowConfig, execution_id: int | None, updated: datetime) -> datetime:
    if execution_id is None:
        return updated
    started = (
        FlowExecution.objects.filter(
            flow_group=flow.flow_group, flow_name=flow.flow_name, execution_id=execution_id
        )
        .values_list("started_at", flat=True)
        .first()
    )
    return started or updated


def _committed(flow: FlowConfig, props: dict[str, str]) -> tuple[int | None, datetime | None]:
    """The lowest log position every captured table committed, and when the run that read up to it
    started (None, None before every table has one)."""
    found: list[tuple[int, int | None, datetime]] = []
    for _urn, mark, execution_id, updated in _marks(flow, props):
        try:
            found.append((parse_lsn(mark), execution_id, updated))
        except ValueError:
            return None, None
    if not found:
        return None, None
    position, execution_id, updated = min(found, key=lambda item: item[0])
    return position, _started(flow, execution_id, updated)


def _committed_binlog(
    flow: FlowConfig, props: dict[str, str]
) -> tuple[cdc_mysql.Position | None, datetime | None]:
    """The binlog position the flow's next run reads from (the earliest the tables committed), and
    the start of the oldest run that committed one of them (None, None before every table has one)."""
    position: cdc_mysql.Position | None = None
    started: datetime | None = None
    for _urn, mark, execution_id, updated in _marks(flow, props):
        try:
            here = cdc_mysql.parse_position(mark)
        except ValueError:
            return None, None
        if position is None:
            position = here
        elif type(position) is type(here):
            position = position.earlier(here)  # type: ignore[arg-type]
        when = _started(flow, execution_id, updated)
        started = when if started is None else min(started, when)
    return position, started


def _last_run(flow: FlowConfig) -> datetime:
    last = FlowExecution.objects.filter(
        flow_group=flow.flow_group, flow_name=flow.flow_name, started_at__isnull=False
    ).aggregate(last=Max("started_at"))["last"]
    return last or flow.created


def _size(count: int) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return str(count)


def _cache_key(flow: FlowConfig) -> str:
    return f"flowport:cdc-slot:{flow.pk}"


def forget(flow: FlowConfig) -> None:
    """Drop the cached reading (after something changed it: a new snapshot was asked for)."""
    cache.delete(_cache_key(flow))


def read(flow: FlowConfig, *, fresh: bool = False, now: datetime | None = None) -> SlotReport | None:
    """The flow's slot, from the cache when read within ``CDC_SLOT_CACHE_SECONDS`` (``fresh``
    reads the server anyway); None when the flow keeps no slot (not cdc, or a MariaDB binlog)."""
    key = _cache_key(flow)
    if not fresh and (cached := cache.get(key)) is not None:
        return cached
    now = now or timezone.now()
    if (found := capture_of(flow)) is not None:
        report = _read(flow, *found, now)
    elif (found := binlog_capture_of(flow)) is not None:
        report = _read_binlog(flow, *found, now)
    else:
        return None
    report.snapshots = _snapshots(flow, found[1])
    cache.set(key, report, settings.CDC_SLOT_CACHE_SECONDS)
    return report


def _judge_lag(report: SlotReport, limits: Thresholds, log: str) -> None:
    """Mark ``report`` lagging, saying why, when its lag passes the flow's thresholds (``log``:
    what the server keeps, "log" or "binlog")."""
    behind, seconds = report.lag_bytes or 0, report.lag_seconds
    why = []
    if limits.lag_bytes and behind > limits.lag_bytes:
        about = "" if report.lag_bytes_exact else "up to "
        why.append(f"{about}{_size(behind)} of {log} behind (threshold {_size(limits.lag_bytes)})")
    if limits.lag_seconds and seconds is not None and seconds > limits.lag_seconds:
        why.append(f"{seconds:.0f} s behind (threshold {limits.lag_seconds} s)")
    if why:
        report.problems.append(LAGGING)
        report.status = "lagging"
        report.message = (
            f"The flow is {' and '.join(why)}; the server keeps {_size(report.retained_bytes or 0)} of {log}."
        )


def _read(flow: FlowConfig, name: str, props: dict[str, str], now: datetime) -> SlotReport:
    position, caught_up_at = _committed(flow, props)
    try:
        with source_connection(props, str(flow), timeout=settings.CDC_SLOT_TIMEOUT_SECONDS) as conn:
            slot = cdc_pg.state(conn, name)
    except Exception as error:  # a page or a monitor says so; the run itself fails with the details
        reason = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
        return SlotReport(name, "unreachable", f"The source server could not be read: {reason}", now)
    last_run = _last_run(flow)
    if slot is None:
        if position is None:
            message = "No slot yet: the flow's first run creates it and snapshots the tables."
            return SlotReport(name, "new", message, now, last_run_at=last_run)
        message = (
            f"Replication slot {name} is missing on the server while the tables have positions "
            "(dropped by hand?): the changes since are gone. Runs fail until you ask for a new snapshot."
        )
        return SlotReport(name, "missing", message, now, last_run_at=last_run, problems=[LOST])
    base = position if position is not None else slot.confirmed
    lag_bytes = max(0, slot.current - base)
    lag_seconds = 0.0 if lag_bytes == 0 else None
    if lag_bytes and caught_up_at is not None:
        lag_seconds = max(0.0, (now - caught_up_at).total_seconds())
    report = SlotReport(
        name,
        "ok",
        "",
        now,
        lag_bytes=lag_bytes,
        lag_seconds=lag_seconds,
        retained_bytes=slot.retained_bytes,
        safe_wal_bytes=slot.safe_wal_bytes,
        wal_status=slot.wal_status,
        active=slot.active,
        caught_up_at=caught_up_at,
        last_run_at=last_run,
    )
    if slot.wal_status == "lost":
        report.status, report.problems = "lost", [LOST]
        report.message = (
            f"Replication slot {name} was lost on the server: the log it needed was removed "
            "(max_slot_wal_keep_size). Runs fail until you ask for a new snapshot."
        )
        return report
    limits = thresholds(props)
    _judge_lag(report, limits, "log")
    idle = (now - last_run).total_seconds()
    if limits.inactive_seconds and not slot.active and idle > limits.inactive_seconds:
        report.problems.append(INACTIVE)
        if report.status == "ok":
            report.status = "inactive"
        report.message = " ".join(
            filter(
                None,
                [
                    report.message,
                    f"No run has read slot {name} for {idle / 3600:.1f} h (threshold "
                    f"{limits.inactive_seconds} s) while the server keeps {_size(slot.retained_bytes)} of "
                    "log for it.",
                ],
            )
        )
    return report


def _read_binlog(flow: FlowConfig, name: str, props: dict[str, str], now: datetime) -> SlotReport:
    """A MariaDB flow's reading: its binlog position against the server's (no slot, no retention)."""
    position, caught_up_at = _committed_binlog(flow, props)
    try:
        conn = binlog_connection(props, str(flow), timeout=settings.CDC_SLOT_TIMEOUT_SECONDS)
        try:
            lag = None if position is None else binlog_lag.read(conn, position)
        finally:
            conn.close()
    except Exception as error:  # a page or a monitor says so; the run itself fails with the details
        reason = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
        report = SlotReport(name, "unreachable", f"The source server could not be read: {reason}", now)
        report.kind = "binlog"
        return report
    last_run = _last_run(flow)
    if position is None or lag is None:
        message = "No position yet: the flow's first run snapshots the tables."
        return SlotReport(name, "new", message, now, last_run_at=last_run, kind="binlog")
    report = SlotReport(
        name,
        "ok",
        "",
        now,
        lag_bytes=lag.behind_bytes,
        retained_bytes=lag.retained_bytes,
        caught_up_at=caught_up_at,
        last_run_at=last_run,
        kind="binlog",
        lag_transactions=lag.behind_transactions,
        lag_bytes_exact=lag.exact_bytes,
        position=position.text(),
        server_position=lag.current.text(),
        oldest_binlog=lag.oldest,
    )
    if lag.expired:
        report.status, report.problems = "lost", [LOST]
        report.message = (
            f"The server no longer has the binlog the flow's position {position.text()} needs (expired or "
            f"purged; its oldest file is {lag.oldest or 'none'}). Runs fail until you ask for a new snapshot."
        )
        return report
    behind = lag.behind_bytes or 0
    report.lag_seconds = 0.0 if behind == 0 else None
    if behind and caught_up_at is not None:
        report.lag_seconds = max(0.0, (now - caught_up_at).total_seconds())
    _judge_lag(report, thresholds(props), "binlog")
    return report


def _episode(flow: FlowConfig, kind: str) -> int:
    return Event.objects.filter(kind=OK, dedupe_key__startswith=f"{kind}.cleared:{flow.pk}#").count()


def judge(flow: FlowConfig, report: SlotReport) -> int:
    """Raise the events the reading calls for, each once per episode; how many were raised."""
    raised = 0
    where = {"flow_group": flow.flow_group, "flow_name": flow.flow_name, "subject": report.slot}
    if report.status == "unreachable":
        return 0  # nothing is known: no condition starts or clears
    for kind in CONDITIONS:
        if kind != LOST and LOST in report.problems:
            continue  # no lag is measured on a lost slot: its other conditions neither start nor clear
        episode = _episode(flow, kind)
        opened = f"{kind}:{flow.pk}#{episode}"
        if kind in report.problems:
            severity = Event.Severity.ERROR if kind == LOST else Event.Severity.WARNING
            message = f"{flow}: {report.message}"
            raised += bool(raise_event(kind, message, severity=severity, dedupe_key=opened, **where))
        elif Event.objects.filter(dedupe_key=opened).exists():
            message = f"{flow}: {report.what} is no longer {kind.rsplit('_', 1)[1]}."
            raised += bool(
                raise_event(
                    OK,
                    message,
                    severity=Event.Severity.INFO,
                    dedupe_key=f"{kind}.cleared:{flow.pk}#{episode}",
                    **where,
                )
            )
    return raised


_next_check = 0.0
_after_pk = 0


def check_slots(now: datetime | None = None, *, force: bool = False) -> int:
    """Read capturing flows' slots and raise what they call for; how many events were raised. At
    most every ``CDC_SLOT_INTERVAL_SECONDS`` per process, and for at most ``CDC_SLOT_BUDGET_SECONDS``
    a pass (a source that does not answer costs its timeout): the next pass goes on after the last
    flow read, so every flow comes round however many there are."""
    global _next_check, _after_pk
    clock = time.monotonic()
    if not force and clock < _next_check:
        return 0
    _next_check = clock + settings.CDC_SLOT_INTERVAL_SECONDS
    deadline = clock + settings.CDC_SLOT_BUDGET_SECONDS
    flows = list(capturing_flows().filter(pk__gt=_after_pk).order_by("pk")[: settings.CDC_SLOT_MAX_FLOWS])
    if not flows and _after_pk:
        _after_pk = 0
        flows = list(capturing_flows().order_by("pk")[: settings.CDC_SLOT_MAX_FLOWS])
    raised = 0
    for index, flow in enumerate(flows):
        if index and time.monotonic() > deadline and not force:  # at least one flow a pass
            break
        _after_pk = flow.pk
        try:
            report = read(flow, fresh=True, now=now)
            if report is not None:
                raised += judge(flow, report)
        except Exception:
            logger.exception("could not judge the replication slot of flow %s", flow)
    else:
        if len(flows) < settings.CDC_SLOT_MAX_FLOWS:
            _after_pk = 0  # the last flow was read: the next pass starts again from the first
    return raised
