"""A backfill's range judged before it starts, and what it will replace, in the watermark's terms.

A backfill names ``(low, high]`` as the source's watermark does: numbers for a numeric column,
dates or times for a time column (``2024-03-01``, ``2024-03-01T10:00:00Z``), file times for a files
source (ISO times, or the stored ``<ms>:<path>`` form). :func:`bound_key` makes any of these
comparable, so :func:`refusal` can hold a range against what the dataset's loads covered (the
state store's history) and refuse one that matches nothing, saying what exists. What each
destination will replace is said by its write mode
(:func:`portal.pipeline.destinations.write_modes.backfill_replacement`; the page shows it before the
backfill runs, :mod:`portal.pipeline.destinations.commitplan` does it). Nothing here imports a
destination: the commit plan imports this module.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation

from portal.pipeline import watermarks

_FILES = re.compile(r"^(\d{15})(?::(.*))?$")


def bound_key(text: str | None) -> tuple[str, object] | None:
    """``("number", n)``, ``("time", utc datetime)`` or None when the text is neither."""
    value = watermarks.value_of(text)
    if value is None or not value.strip():
        return None
    value = value.strip()
    files = _FILES.match(value)
    if files:
        return "time", dt.datetime.fromtimestamp(int(files.group(1)) / 1000, dt.UTC)
    try:
        return "number", Decimal(value)
    except InvalidOperation:
        pass
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return "time", moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


SHORT_NAME = 36  # a file name longer than this is shown with its middle left out


def short_name(path: str) -> str:
    """A file's name without its folders, its middle left out when long:
    ``part-00001-3f2a…c000.snappy.parquet``."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if len(name) <= SHORT_NAME:
        return name
    half = (SHORT_NAME - 1) // 2
    return f"{name[:half]}…{name[-half:]}"


def shown(watermark: str | None, *, short: bool = False) -> str:
    """A watermark as a person reads it (a files watermark as its modification time and file,
    the file's name shortened when ``short``; its raw form is for a hover or a detail)."""
    value = watermarks.value_of(watermark) or ""
    files = _FILES.match(value)
    if files:
        moment = dt.datetime.fromtimestamp(int(files.group(1)) / 1000, dt.UTC)
        name = files.group(2) or "file"
        if short:
            return f"{moment:%Y-%m-%d %H:%M:%S} UTC, {short_name(name)}"
        return f"{moment.isoformat(timespec='seconds').replace('+00:00', 'Z')} ({name})"
    return value


def as_bound(watermark: str | None) -> str:
    """A stored watermark as a backfill's bound is typed (a files watermark as its file time)."""
    value = watermarks.value_of(watermark) or ""
    files = _FILES.match(value)
    if files:
        moment = dt.datetime.fromtimestamp(int(files.group(1)) / 1000, dt.UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return value


def _before(a: tuple[str, object] | None, b: tuple[str, object] | None) -> bool | None:
    """a <= b when both are of one kind; None when they cannot be compared."""
    if a is None or b is None or a[0] != b[0]:
        return None
    return bool(a[1] <= b[1])  # type: ignore[operator]  # one kind: numbers or UTC times


def refusal(low: str | None, high: str, loaded_from: str | None, loaded_to: str | None) -> str | None:
    """Why ``(low, high]`` matches nothing the dataset's loads covered (``loaded_from``, exclusive;
    None: from the first record, up to ``loaded_to``), or None when it may match something."""
    lo, hi = bound_key(low), bound_key(high)
    if low and _before(hi, lo):
        return f"low {low} is not before high {high}: the range holds nothing"
    covered = f"loads so far cover {'from ' + shown(loaded_from) if loaded_from else 'from the first record'} up to {shown(loaded_to)}"
    if low and _before(bound_key(loaded_to), lo):
        return f"nothing was loaded after {low}: the {covered}"
    if loaded_from and _before(hi, bound_key(loaded_from)):
        return f"nothing was loaded up to {high}: the {covered}"
    return None


def covers_everything(low: str | None, high: str, stored: str | None) -> bool:
    """Whether ``(low, high]`` re-reads every load so far (from the first record past ``stored``)."""
    return not low and stored is not None and bool(_before(bound_key(stored), bound_key(high)))
