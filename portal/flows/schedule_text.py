"""A schedule in words for the flow form and the flow page: a unix cron
expression described ("at 09:00 on Monday through Friday") and its next run
times. What a valid schedule is, and when it runs, is flows.schedules' to
say; this module only puts it into words."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError

from portal.flows.schedules import next_run_times, to_unix_cron, validate_schedule

_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = (
    "", "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_NAMES = {name[:3].lower(): number for number, name in enumerate(_DAYS[:7])} | {
    name[:3].lower(): number for number, name in enumerate(_MONTHS) if name
}
_ALIAS_TEXT = {
    "@hourly": "every hour, on the hour",
    "@daily": "every day at 00:00",
    "@midnight": "every day at 00:00",
    "@weekly": "every Sunday at 00:00",
    "@monthly": "at 00:00 on day 1 of the month",
    "@yearly": "at 00:00 on 1 January, every year",
    "@annually": "at 00:00 on 1 January, every year",
}
_ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}


class _Unsupported(Exception):
    """A field this describer does not put into words; the runs still show."""


def _number(token: str) -> int:
    token = token.lower()
    if token in _NAMES:
        return _NAMES[token]
    if not token.isdigit():
        raise _Unsupported(token)
    return int(token)


def _join(items: list[str], word: str = "and") -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {word} {items[-1]}"


def _list_text(field_: str, name: Callable[[int], str]) -> str:
    """`1-5` → "Monday through Friday"; `1,15` → "1 and 15"; `*/3` → "every 3rd"."""
    parts = []
    for item in field_.split(","):
        base, _, step = item.partition("/")
        if step:
            start = "" if base in ("*", "0") else f" from {name(_number(base.split('-')[0]))}"
            parts.append(f"every {_number(step)}{_suffix(_number(step))}{start}")
        elif "-" in base:
            low, high = base.split("-", 1)
            parts.append(f"{name(_number(low))} through {name(_number(high))}")
        else:
            parts.append(name(_number(base)))
    return _join(parts)


def _suffix(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _plain_numbers(field_: str) -> list[int] | None:
    if not re.fullmatch(r"\d+(,\d+)*", field_):
        return None
    return [int(n) for n in field_.split(",")]


def _every(field_: str, first: str = "0") -> int | None:
    """n for `*/n` (or `<first>/n`), the "every n" steps."""
    match = re.fullmatch(rf"(?:\*|{first})/(\d+)", field_)
    return int(match.group(1)) if match else None


def _uneven_steps_listed(field_: str, cycle: int) -> str:
    """`*/45` in the minute field fires at :00 and :45, not every 45 minutes:
    a step that does not divide its field's cycle is spelled out as numbers."""
    n = _every(field_)
    return ",".join(str(v) for v in range(0, cycle, n)) if n and cycle % n else field_


def _time_text(minute: str, hour: str) -> str:
    minute, hour = _uneven_steps_listed(minute, 60), _uneven_steps_listed(hour, 24)
    minutes, hours = _plain_numbers(minute), _plain_numbers(hour)
    if minutes is not None and hours is not None and len(minutes) * len(hours) <= 6:
        return "at " + _join([f"{h:02d}:{m:02d}" for h in hours for m in minutes])
    if minute == "*":
        minute_text = "every minute"
    elif (n := _every(minute)) is not None:
        minute_text = "every minute" if n == 1 else f"every {n} minutes"
    elif minutes == [0]:
        minute_text = "on the hour"
    else:
        minute_text = f"at minute {_list_text(minute, str)}"
    if hour == "*":
        if minute_text.startswith("every"):
            return minute_text
        return f"every hour, {minute_text}" if minutes == [0] else f"every hour {minute_text}"
    if (n := _every(hour)) is not None:
        return f"every {n} hours, {minute_text}" if n > 1 else f"every hour, {minute_text}"
    return f"{minute_text}, during hour {_list_text(hour, str)}"


def _day_of_week_text(dow: str) -> str:
    if match := re.fullmatch(r"([0-7a-zA-Z]{1,3})#([1-5])", dow):
        return f"the {_ORDINALS[int(match.group(2))]} {_DAYS[_number(match.group(1))]} of the month"
    if match := re.fullmatch(r"L([0-7a-zA-Z]{1,3})", dow):  # croniter's "last <day>"
        return f"the last {_DAYS[_number(match.group(1))]} of the month"
    return _list_text(dow, lambda n: _DAYS[n] if 0 <= n <= 7 else str(n))


def _day_text(dom: str, dow: str) -> str:
    if dom == "*" and dow == "*":
        return "every day"
    parts = []
    if dom != "*":
        if dom.upper() == "L":
            parts.append("on the last day of the month")
        else:
            numbers = _plain_numbers(dom)
            noun = "day" if numbers is not None and len(numbers) == 1 else "days"
            parts.append(f"on {noun} {_list_text(dom, str)} of the month")
    if dow != "*":
        parts.append(f"on {_day_of_week_text(dow)}")
    return _join(parts, "or")  # cron fires when either day field matches


def _month_text(month: str) -> str:
    if month == "*":
        return ""
    if (n := _every(month, first="1")) is not None and 12 % n == 0:
        return f"every {n} months"
    return "in " + _list_text(month, lambda n: _MONTHS[n] if 1 <= n <= 12 else str(n))


def describe_schedule(unix: str) -> str:
    """A unix cron expression in words (lower case): "every 5 minutes",
    "at 09:00 on Monday through Friday". Unusual fields fall back to
    naming the expression; the next run times are the exact answer."""
    if not unix:
        return "runs once, as soon as it is saved (no schedule)"
    if unix in _ALIAS_TEXT:
        return _ALIAS_TEXT[unix]
    if unix.count(" ") != 4:  # croniter's seven-field form of a Quartz year (flows.schedules)
        return f"on the cron schedule {unix}"
    minute, hour, dom, month, dow = unix.split(" ")
    try:
        time_text = _time_text(minute, hour)
        day_text = _day_text(dom, dow)
        month_text = _month_text(month)
    except (_Unsupported, IndexError, ValueError):
        return f"on the cron schedule {unix}"
    if day_text == "every day" and (time_text.startswith("every") or month_text):
        day_text = ""
    return " ".join(part for part in (time_text, day_text, month_text) if part)


@dataclass
class SchedulePreview:
    expression: str
    unix: str = ""
    description: str = ""
    next_runs: list[datetime] = field(default_factory=list)
    error: str = ""
    time_zone: str = field(default_factory=lambda: settings.TIME_ZONE)

    @property
    def errors(self) -> list[str]:
        return [self.error] if self.error else []

    @property
    def converted(self) -> bool:
        """A Quartz (or oddly spaced) expression, stored in its unix form."""
        return bool(self.unix) and self.unix != self.expression


def schedule_preview(expression: str, count: int = 5, after: datetime | None = None) -> SchedulePreview:
    """Validation and next runs come from flows.schedules, as on save."""
    expression = " ".join((expression or "").split())
    preview = SchedulePreview(expression)
    try:
        validate_schedule(expression)  # a schedule that never fires is refused while typing too
        preview.unix = to_unix_cron(expression)
    except ValidationError as error:
        preview.error = " ".join(error.messages)
        return preview
    preview.description = describe_schedule(preview.unix)
    preview.next_runs = next_run_times(preview.unix, count, after) if preview.unix else []
    return preview
