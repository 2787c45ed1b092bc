"""Per-flow and per-job run policies read from a flow's properties (owned by
the flow catalog, obeyed by orchestration), Gobblin's keys
where Gobblin has them, with the service defaults from settings. `validate`
is called when a flow is saved, so a bad value is a 400 naming the key, not a
surprise at run time."""

from __future__ import annotations

from collections.abc import Mapping

from django.conf import settings
from django.core.exceptions import ValidationError

ALLOW_CONCURRENT = "flow.allowConcurrentExecution"
CATCH_UP = "flow.catchUpPolicy"
RETRY_COUNT = "job.retry.count"
RETRY_BACKOFF = "job.retry.backoff.seconds"
FLOW_SLA = ("gobblin.flow.sla.time", "gobblin.flow.sla.timeunit")
JOB_START_SLA = ("gobblin.job.start.sla.time", "gobblin.job.start.sla.timeunit")
TIME_UNITS = {"SECONDS": 1, "MINUTES": 60, "HOURS": 3600, "DAYS": 86400}
RETENTION_DAYS = "flow.retentionDays"
MAX_RETENTION_DAYS = 36500
MAX_RETRIES = 20
DEFAULT_BACKOFF_SECONDS = 10.0
MAX_BACKOFF_SECONDS = 3600.0

_BOOLEANS = {"true": True, "false": False}


def _bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    value = props.get(key)
    if value is None or value == "":
        return default
    if str(value).lower() not in _BOOLEANS:
        raise ValidationError({key: f"must be true or false, got {value!r}"})
    return _BOOLEANS[str(value).lower()]


def _number(props: Mapping[str, str], key: str, default: float, *, low: float, high: float) -> float:
    value = props.get(key)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ValidationError({key: f"must be a number, got {value!r}"}) from None
    if not low <= number <= high:
        raise ValidationError({key: f"must be between {low:g} and {high:g}, got {value}"})
    return number


def _duration(props: Mapping[str, str], keys: tuple[str, str], default_seconds: int) -> float:
    time_key, unit_key = keys
    unit = str(props.get(unit_key) or "MINUTES").upper()
    if unit not in TIME_UNITS:
        raise ValidationError({unit_key: f"must be one of {', '.join(TIME_UNITS)}, got {unit!r}"})
    if not props.get(time_key):
        return float(default_seconds)
    return _number(props, time_key, 0, low=1, high=10**7) * TIME_UNITS[unit]


def allow_concurrent_execution(flow) -> bool:
    return _bool(flow.properties, ALLOW_CONCURRENT, settings.FLOW_ALLOW_CONCURRENT_EXECUTION)


def retry_count(props: Mapping[str, str], default: int = 0) -> int:
    return int(_number(props, RETRY_COUNT, default, low=0, high=MAX_RETRIES))


def retry_backoff_seconds(props: Mapping[str, str], retries_done: int) -> float:
    """Exponential: the base, then twice that, …, capped at an hour."""
    base = _number(props, RETRY_BACKOFF, DEFAULT_BACKOFF_SECONDS, low=0, high=MAX_BACKOFF_SECONDS)
    return min(MAX_BACKOFF_SECONDS, base * 2**retries_done)


def flow_sla_seconds(props: Mapping[str, str]) -> float:
    return _duration(props, FLOW_SLA, settings.FLOW_SLA_SECONDS)


def job_start_sla_seconds(props: Mapping[str, str]) -> float:
    return _duration(props, JOB_START_SLA, settings.JOB_START_SLA_SECONDS)


def retention_days(props: Mapping[str, str]) -> int:
    """How many days of this flow's history the scheduler keeps (retention)."""
    value = props.get(RETENTION_DAYS)
    if value is None or value == "":
        return settings.HISTORY_RETENTION_DAYS
    try:
        days = int(str(value).strip())
    except ValueError:
        raise ValidationError({RETENTION_DAYS: f"must be a whole number of days, got {value!r}"}) from None
    if not 1 <= days <= MAX_RETENTION_DAYS:
        raise ValidationError({RETENTION_DAYS: f"must be between 1 and {MAX_RETENTION_DAYS}, got {days}"})
    return days


def validate(props: Mapping[str, str]) -> None:
    """Raise ValidationError naming the first bad run-policy key."""
    retention_days(props)
    _bool(props, ALLOW_CONCURRENT, False)
    retry_count(props)
    retry_backoff_seconds(props, 0)
    flow_sla_seconds(props)
    job_start_sla_seconds(props)


def catch_up(props: Mapping[str, str]) -> str:
    """What the scheduler does with ticks missed while none ran or the flow
    was paused: `skip`, `latest` or `all` (SCHEDULER_DEFAULT_CATCH_UP if unset)."""
    return props.get(CATCH_UP) or settings.SCHEDULER_DEFAULT_CATCH_UP
