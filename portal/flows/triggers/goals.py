"""A freshness goal's words and clock: "within 2h" or "by 06:00" read and written back, and when a
goal is next broken. No database: the models (FreshnessGoal) and the save path use them."""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta

from django.utils import timezone

_SPAN = re.compile(r"^(?:within\s+)?(\d+)\s*(m|min|h|d)$", re.IGNORECASE)
_BY = re.compile(r"^(?:by\s+)?([01]?\d|2[0-3]):([0-5]\d)$", re.IGNORECASE)
_UNIT_SECONDS = {"m": 60, "min": 60, "h": 3600, "d": 86400}
FRESHNESS_HELP = 'e.g. "within 2h", "within 30m", "within 1d", or "by 06:00" (daily, portal time zone)'


def parse_goal(text: str) -> tuple[int | None, time | None]:
    """("within 2h" → 7200 s) or ("by 06:00" → 06:00); ValueError says what is wrong."""
    text = (text or "").strip()
    if match := _SPAN.match(text):
        seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]
        if not 60 <= seconds <= 31 * 86400:
            raise ValueError("a freshness span must be between 1 minute and 31 days")
        return seconds, None
    if match := _BY.match(text):
        return None, time(int(match.group(1)), int(match.group(2)))
    raise ValueError(f"not a freshness goal: {text!r} ({FRESHNESS_HELP})")


def goal_text(within_seconds: int | None, daily_by: time | None) -> str:
    if daily_by is not None:
        return f"by {daily_by:%H:%M}"
    seconds = within_seconds or 0
    for unit, size in (("d", 86400), ("h", 3600)):
        if seconds % size == 0:
            return f"within {seconds // size}{unit}"
    return f"within {seconds // 60}m"


def _deadline_at_or_after(daily_by: time, moment: datetime) -> datetime:
    local = timezone.localtime(moment)
    deadline = local.replace(hour=daily_by.hour, minute=daily_by.minute, second=0, microsecond=0)
    return deadline if deadline >= local else deadline + timedelta(days=1)


def next_due(within_seconds: int | None, daily_by: time | None, after: datetime) -> datetime:
    """When a goal last met by a commit at `after` is next broken: a span after it, or (daily)
    the deadline after the first one it meets."""
    if daily_by is None:
        return after + timedelta(seconds=within_seconds or 0)
    return _deadline_at_or_after(daily_by, after) + timedelta(days=1)


def first_due(within_seconds: int | None, daily_by: time | None, since: datetime) -> datetime:
    """A goal set (or changed) at `since` with no commit yet counts from then: a span after it,
    or the first deadline after it."""
    if daily_by is None:
        return since + timedelta(seconds=within_seconds or 0)
    return _deadline_at_or_after(daily_by, since)
