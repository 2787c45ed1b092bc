"""The SpecExecutor health monitor: executors whose workers stopped
heartbeating, Spark masters that do not answer, a broker that does not
answer. Each verdict is kept in a HealthCheck row; an event is raised when a
verdict changes (under the row's lock, so once, whichever process saw it).
Probes have short timeouts and run in parallel, so a pass takes at most
about one timeout however much is down."""

from __future__ import annotations

import logging
import socket
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.events.models import Event
from portal.events.services import raise_event
from portal.monitoring.models import HealthCheck
from portal.topology.models import SpecExecutor

logger = logging.getLogger(__name__)

UP, DOWN, SKIPPED = HealthCheck.Status.UP, HealthCheck.Status.DOWN, HealthCheck.Status.SKIPPED
DEFAULT_SPARK_PORT = 7077


@dataclass
class Verdict:
    key: str
    kind: str
    target: str
    status: str
    message: str
    detail: str = ""


# --- recording verdicts -----------------------------------------------------------------


def _transition_event(verdict: Verdict, previous: str | None, previous_detail: str) -> None:
    if verdict.kind == "executor":
        return _executor_event(verdict, previous_detail)
    if verdict.status == DOWN and previous != DOWN:
        raise_event(
            f"{verdict.kind}.unreachable",
            f"{verdict.target}: {verdict.message}",
            severity=Event.Severity.ERROR,
            subject=verdict.target[:200],
        )
    elif verdict.status == UP and previous == DOWN:
        raise_event(
            f"{verdict.kind}.recovered",
            f"{verdict.target}: {verdict.message}",
            severity=Event.Severity.INFO,
            subject=verdict.target[:200],
        )


def _executor_event(verdict: Verdict, previous: str) -> None:
    health = verdict.detail
    if health == previous:
        return
    bad: dict[str, str] = {
        SpecExecutor.Health.DEGRADED: Event.Severity.WARNING,
        SpecExecutor.Health.UNHEALTHY: "ERROR",
    }
    if health in bad:
        raise_event(
            f"executor.{health.lower()}",
            f"Executor {verdict.target} is {health.lower()}: {verdict.message or 'no reason given'}",
            severity=bad[health],
            subject=verdict.target,
        )
    elif health in (SpecExecutor.Health.HEALTHY, SpecExecutor.Health.BUSY) and previous in bad:
        raise_event(
            "executor.recovered",
            f"Executor {verdict.target} is "
            f"{'healthy' if health == SpecExecutor.Health.HEALTHY else 'usable (busy)'} again: {verdict.message}",
            severity=Event.Severity.INFO,
            subject=verdict.target,
        )


def record(verdict: Verdict, now: datetime | None = None) -> bool:
    """Store a verdict; raise an event if it changed. Returns whether it changed."""
    now = now or timezone.now()
    with transaction.atomic():
        row = HealthCheck.objects.select_for_update().filter(key=verdict.key).first()
        if row is None:
            row, created = HealthCheck.objects.get_or_create(
                key=verdict.key,
                defaults={
                    "kind": verdict.kind,
                    "target": verdict.target,
                    "status": verdict.status,
                    "detail": verdict.detail,
                    "message": verdict.message,
                    "checked_at": now,
                    "changed_at": now,
                },
            )
            if created:
                _transition_event(verdict, None, "")
                return True
            row = HealthCheck.objects.select_for_update().get(pk=row.pk)
        changed = (row.status, row.detail) != (verdict.status, verdict.detail)
        if not changed and (row.target, row.message) == (verdict.target, verdict.message):
            return False  # nothing new: no write (this runs for every executor on every pass)
        previous, previous_detail = row.status, row.detail
        row.target, row.status, row.detail = verdict.target, verdict.status, verdict.detail
        row.message, row.checked_at = verdict.message, now
        if changed:
            row.changed_at = now
        row.save()
        if changed:
            _transition_event(verdict, previous, previous_detail)
    return changed


def _claim_probe(key: str, now: datetime) -> bool:
    """Several scheduler processes run the monitors: only one probes a
    target per MONITORING_PROBE_INTERVAL_SECONDS."""
    recent = now - timedelta(seconds=settings.MONITORING_PROBE_INTERVAL_SECONDS)
    row = HealthCheck.objects.filter(key=key).values_list("checked_at", flat=True).first()
    if row is None:
        return True
    return bool(HealthCheck.objects.filter(key=key, checked_at__lte=recent).update(checked_at=now))


# --- executors: worker heartbeats ----------------------------------------------------------


def check_executors(now: datetime | None = None) -> int:
    """Turn changes of SpecExecutor.health_status (set by worker heartbeats and
    orchestration.control.liveness.sweep_silent_executors) into events. Returns the
    number of transitions."""
    now = now or timezone.now()
    changed = 0
    executors = SpecExecutor.objects.filter(enabled=True).values_list(
        "name", "health_status", "health_message"
    )
    names = set()
    for name, health, message in executors:
        names.add(name)
        statuses: dict[str, str] = {
            SpecExecutor.Health.HEALTHY: UP,
            SpecExecutor.Health.BUSY: UP,  # consumed, jobs wait their turn: no fault
            SpecExecutor.Health.UNKNOWN: SKIPPED,
        }
        status = statuses.get(health, DOWN)
        changed += record(Verdict(f"executor:{name}", "executor", name, status, message, health), now)
    HealthCheck.objects.filter(kind="executor").exclude(target__in=names).delete()
    return changed


# --- Spark masters ---------------------------------------------------------------------------


def spark_master_addresses(master: str) -> list[tuple[str, int]]:
    """spark://h1:7077,h2:7077 (standalone HA) -> [(h1, 7077), (h2, 7077)]."""
    if not master.startswith("spark://"):
        return []
    addresses = []
    for part in master[len("spark://") :].split(","):
        host, _, port = part.strip().rpartition(":") if ":" in part else (part.strip(), "", "")
        host = host.strip("[]")
        try:
            addresses.append((host, int(port) if port else DEFAULT_SPARK_PORT))
        except ValueError:
            continue
    return [(host, port) for host, port in addresses if host]


def tcp_probe(host: str, port: int, timeout: float) -> str:
    """'' when a TCP connection opens within the timeout, else the reason."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return ""
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or exc}"


def _probe_spark_master(master: str, timeout: float) -> tuple[str, str]:
    addresses = spark_master_addresses(master)
    if not addresses:
        return DOWN, "not a spark://host:port URL"
    errors = []
    for host, port in addresses:
        error = tcp_probe(host, port, timeout)
        if not error:
            return UP, f"{host}:{port} accepts connections"
        errors.append(error)
    return DOWN, "; ".join(errors)


def _masters() -> dict[str, list[str]]:
    masters: dict[str, list[str]] = {}
    for name, master in SpecExecutor.objects.filter(enabled=True).values_list("name", "spark_master"):
        if master.startswith(("spark://", "yarn", "k8s://")):
            masters.setdefault(master, []).append(name)
    return masters


SKIP_NOTES = {
    "yarn": "YARN: not probed; the ResourceManager is found through the Hadoop configuration",
    "k8s://": "Kubernetes: not probed; the API server is checked by Spark at submission",
}


# --- the broker --------------------------------------------------------------------------------


def redacted_url(url: str) -> str:
    """A URL without its password, for pages, events and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(unparsable URL)"
    if parts.password is None:
        return url
    netloc = parts.hostname or ""
    if parts.username:
        netloc = f"{parts.username}:***@{netloc}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def broker_address(url: str) -> str:
    """What the pages say of the broker: its scheme and host, never a password or a path
    (an embedded broker's URL is the absolute path of its file on the portal's host)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "(unparsable URL)"
    if not parts.hostname:
        return f"{parts.scheme or 'broker'} (a file on the portal's host)"
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{port}" if port else "")


def probe_broker(url: str, timeout: float) -> str:
    """'' when the Celery broker accepts a connection within the timeout."""
    from kombu import Connection

    connection = Connection(
        url,
        connect_timeout=timeout,
        transport_options={"socket_connect_timeout": timeout, "socket_timeout": timeout, "max_retries": 0},
    )
    try:
        connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
        return ""
    except Exception as exc:  # kombu's transports raise many kinds
        message = f"{type(exc).__name__}: {exc}"[:500].replace(url, broker_address(url))
        path = urlsplit(url).path
        return message.replace(path, "(the broker's file)") if len(path) > 1 else message
    finally:
        try:
            connection.release()
        except Exception:
            logger.debug("closing the broker probe failed", exc_info=True)


# --- one pass --------------------------------------------------------------------------------------


def check_infrastructure(now: datetime | None = None, *, force: bool = False) -> int:
    """Probe the broker and every Spark master the executors use (in
    parallel); returns the number of verdicts that changed."""
    now = now or timezone.now()
    timeout = settings.MONITORING_PROBE_TIMEOUT_SECONDS
    verdicts: list[Verdict] = []
    probes: dict[str, Future[Any]] = {}
    broker_url = settings.CELERY_BROKER_URL
    masters = _masters()
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="probe") as pool:
        if force or _claim_probe("broker", now):
            probes["broker"] = pool.submit(probe_broker, broker_url, timeout)
        for master, executors in masters.items():
            key = f"spark_master:{master}"
            note = next((n for prefix, n in SKIP_NOTES.items() if master.startswith(prefix)), None)
            if note:
                verdicts.append(
                    Verdict(key, "spark_master", master, SKIPPED, f"{note} ({', '.join(executors)})")
                )
            elif force or _claim_probe(key, now):
                probes[key] = pool.submit(_probe_spark_master, master, timeout)
        results = {key: future.result() for key, future in probes.items()}
    if "broker" in results:
        error = results["broker"]
        verdicts.append(
            Verdict(
                "broker",
                "broker",
                broker_address(broker_url),
                DOWN if error else UP,
                error or "accepts connections",
            )
        )
    for master, executors in masters.items():
        key = f"spark_master:{master}"
        if key in results:
            status, message = results[key]
            verdicts.append(
                Verdict(key, "spark_master", master, status, f"{message} (used by {', '.join(executors)})")
            )
    changed = sum(record(verdict, now) for verdict in verdicts)
    HealthCheck.objects.filter(kind="spark_master").exclude(target__in=list(masters)).delete()
    return changed
