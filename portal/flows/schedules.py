"""Flow schedules: unix cron (5 fields), with Gobblin's Quartz form accepted.

Gobblin stored Quartz expressions (`0 0/5 * * * ?`: seconds first, `?` for
"no specific value", day-of-week 1-7 from Sunday, an optional year last).
Flows imported from Gobblin keep working because such an expression is
converted to the unix form here, once, when the flow is saved. A Quartz year
field other than `*` has no unix equivalent: it is kept as croniter's
seven-field form (`minute hour dom month dow 0 year`), which the scheduler
evaluates directly. Gobblin's "never run" schedule `0 0 0 ? 1 1 2050` is one.
"""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter
from django.conf import settings
from django.core.exceptions import ValidationError

_ALIASES = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
_QUARTZ_DOW_NUMBER = re.compile(r"(?<![#/\d])([1-7])(?!\d)")


def _quartz_dow_to_unix(field: str) -> str:
    # Quartz counts Sunday as 1, unix cron as 0. Only day numbers move; step
    # values after "/" and occurrence numbers after "#" keep their meaning.
    return _QUARTZ_DOW_NUMBER.sub(lambda m: str(int(m.group(1)) - 1), field)


def _quartz_zero_steps(field: str) -> str:
    """Quartz 2.2.3, Gobblin's pin, reads an increment of 0 as no increment at all: `1/0` is
    the value 1 alone (Gobblin's own test schedule `0 1/0 * ? * *` runs at minute 1 of every
    hour), `a-b/0` the value a, and `*/0` every value. Unix cron has no such step, so the
    field is written without it."""
    items = []
    for item in field.split(","):
        base, slash, step = item.partition("/")
        if slash and step and not step.strip("0"):
            item = "*" if base == "*" else base.split("-")[0]
        items.append(item)
    return ",".join(items)


def to_unix_cron(expression: str) -> str:  # noqa: C901
    """Return the 5-field unix form of a unix or Quartz cron expression.

    Raises ValidationError with a reason a person can act on.
    """
    expression = " ".join(expression.split())
    if not expression:
        return ""
    if expression.lower() in _ALIASES:
        return expression.lower()
    fields = expression.split(" ")
    if len(fields) == 7 and fields[5] == "0" and _YEAR_FIELD.match(fields[6]):
        # Already the stored seven-field form: a Quartz day-of-week is 1-7, never 0.
        if croniter.is_valid(expression):
            return expression
        raise ValidationError(f"{expression!r} is not a valid cron expression{_which_field(fields[:5])}.")
    if len(fields) in (6, 7):
        seconds, minute, hour, dom, month, dow, *year = (_quartz_zero_steps(field) for field in fields)
        if seconds not in {"0", "*"}:
            raise ValidationError(
                f"Quartz expression {expression!r} fires at second {seconds!r}; "
                "Flowport schedules have minute resolution, use 0 for the seconds field."
            )
        dom = "*" if dom == "?" else dom
        dow = "*" if dow == "?" else _quartz_dow_to_unix(dow)
        fields = [minute, hour, dom, month, dow]
        if year and year[0] not in {"*", "?"}:
            if not _YEAR_FIELD.match(year[0]):
                raise ValidationError(
                    f"Quartz year field {year[0]!r} is not valid; use years {_FIRST_YEAR}-{_LAST_YEAR}, "
                    "ranges (2030-2035), lists (2030,2040), steps (2030/5) or *."
                )
            fields += ["0", year[0]]
    elif len(fields) != 5:
        raise ValidationError(
            f"{expression!r} has {len(fields)} fields; a unix cron expression has 5 "
            "(minute hour day-of-month month day-of-week), a Quartz one 6 or 7."
        )
    unix = " ".join(fields)
    if "?" in unix or not croniter.is_valid(unix):
        raise ValidationError(f"{expression!r} is not a valid cron expression{_which_field(fields[:5])}.")
    _check_steps(expression, fields[:5])
    return unix


_FIRST_YEAR, _LAST_YEAR = 1970, 2099  # the years croniter (like Quartz) can evaluate
_YEAR = r"(?:19[7-9]\d|20\d\d)"
_YEAR_FIELD = re.compile(rf"^{_YEAR}(?:-{_YEAR})?(?:/\d{{1,2}})?(?:,{_YEAR}(?:-{_YEAR})?(?:/\d{{1,2}})?)*\Z")


_FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
_FIELD_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


def _which_field(fields: list[str]) -> str:
    """Name the first field whose plain numbers are out of range, to say *why*."""
    for name, (low, high), field in zip(_FIELD_NAMES, _FIELD_RANGES, fields, strict=True):
        for number in re.findall(r"(?<![/#])\b\d+\b", field):
            if not low <= int(number) <= high:
                return f": {name} {number} is outside {low}-{high}"
    return ""


def _check_steps(expression: str, fields: list[str]) -> None:
    """A step must repeat inside its field: croniter takes `*/61` in the minute
    field as "minute 0 only", i.e. hourly, which no one writing it meant (and
    Quartz refuses it too)."""
    for name, (low, high), field in zip(_FIELD_NAMES, _FIELD_RANGES, fields, strict=True):
        span = high - low if name != "day-of-week" else 6
        for step in re.findall(r"/(\d+)", field):
            if not 1 <= int(step) <= span:
                raise ValidationError(
                    f"{expression!r}: the {name} step /{step} is outside 1-{span}, "
                    f"so it would not repeat within the {name} field."
                )


# How far ahead a schedule must fire at least once: February 29th comes within any 5 years.
FIRE_WITHIN_YEARS = 5
_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August",
                "September", "October", "November", "December")  # fmt: skip


def validate_schedule(value: str) -> None:
    """A valid expression that never fires (`0 0 31 2 *`: there is no February 31st) is
    refused too: saved, it would be a flow that silently never runs. A Quartz year field is
    left out of the question (Gobblin's "never run" schedule names a year on purpose)."""
    unix = to_unix_cron(value)
    if not unix or unix.startswith("@"):
        return
    fields = unix.split(" ")[:5]
    try:
        croniter(
            " ".join(fields), datetime(2026, 1, 1), max_years_between_matches=FIRE_WITHIN_YEARS
        ).get_next(datetime)
    except CroniterBadDateError:
        raise ValidationError(_never_fires(value, fields), code="never_fires") from None


def _never_fires(expression: str, fields: list[str]) -> str:
    """Why: only a day-of-month no chosen month has can make a valid expression never fire."""
    dom, month = fields[2], fields[3]
    months = [int(m) for m in re.findall(r"\d+", month) if 1 <= int(m) <= 12] if "/" not in month else []
    named = " or ".join(_MONTH_NAMES[m - 1] for m in dict.fromkeys(months)) if months else f"month {month}"
    return (
        f"{expression!r} never fires: the day-of-month field ({dom}) names no day that {named} has. "
        "Pick a day the month has (e.g. 28), or L for its last day."
    )


def next_run_times(expression: str, count: int = 5, after: datetime | None = None) -> list[datetime]:
    """The next `count` fire times, in the scheduler's time zone."""
    unix = to_unix_cron(expression)
    if not unix:
        return []
    tz = ZoneInfo(settings.TIME_ZONE)
    start = (after or datetime.now(tz)).astimezone(tz)
    itr = croniter(unix, start)
    times: list[datetime] = []
    try:
        while len(times) < count:
            times.append(itr.get_next(datetime))
    except CroniterBadDateError:  # a year field whose years have all passed: no more runs
        pass
    return times
