"""Server-rendered SVG charts: a time series as points joined by a line,
with axes and ticks. No JavaScript library; every label is escaped. Each
point carries a <title> (a tooltip) and its data attributes; the pages put
the same numbers in a table next to the chart for screen readers and
keyboard users."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 640, 190
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 14, 30
TIME_STEPS = (
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600,
    86400, 2 * 86400, 7 * 86400, 14 * 86400, 30 * 86400, 91 * 86400, 182 * 86400, 365 * 86400,
)  # fmt: skip


POINT_FILL, FAILED_FILL = "#1f5fbf", "#b42318"
FAILED_CSS = {"failed", "cancelled"}


@dataclass
class ChartPoint:
    at: datetime
    value: float
    label: str
    css: str = ""
    key: str = ""


# --- scales and labels ---------------------------------------------------------------------


def nice_step(span: float, count: int = 4, steps: Sequence[float] | None = None) -> float:
    raw = span / max(1, count) if span > 0 else 1.0
    if steps:
        return next((s for s in steps if s >= raw), steps[-1] * math.ceil(raw / steps[-1]))
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if raw <= m * magnitude)


def ticks(low: float, high: float, step: float) -> list[float]:
    first = math.ceil(low / step - 1e-9) * step
    values: list[float] = []
    value = first
    while value <= high + step * 1e-9 and len(values) < 20:
        values.append(value)
        value += step
    return values


def format_count(value: float, digits: int = 3) -> str:
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.{digits}g}{suffix}"
    return f"{value:.{digits}g}" if value != int(value) else str(int(value))


def axis_labels(values: Sequence[float], y_format: Callable[[float], str]) -> list[str]:
    """Each tick's label, none said twice: counts get the digits that tell neighbours apart (ticks
    of 5 on 1,796,376,889,950 all read "1.8T" at three), and a label another format still repeats
    is left blank."""
    labels = [y_format(value) for value in values]
    if y_format is format_count:
        for digits in (4, 5, 6, 8, 10, 13, 16):
            if len(set(labels)) == len(labels):
                break
            labels = [format_count(value, digits) for value in values]
    return [label if label not in labels[:index] else "" for index, label in enumerate(labels)]


def format_duration(seconds: float) -> str:
    seconds = float(seconds)
    if seconds < 10:
        return f"{seconds:.2g}s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes}m" + (f" {rest}s" if rest else "")
    hours, rest = divmod(round(seconds) // 60, 60)
    return f"{hours}h" + (f" {rest}m" if rest else "")


def format_time(epoch: float, span: float) -> str:
    """A tick label, as precise as the axis' span needs."""
    moment = timezone.localtime(datetime.fromtimestamp(epoch, tz=UTC))
    if span <= 120:
        return moment.strftime("%H:%M:%S")
    if span <= 18 * 3600:
        return moment.strftime("%H:%M")
    if span <= 7 * 86400:
        return moment.strftime("%b %d %H:%M")
    if span <= 200 * 86400:
        return moment.strftime("%b %d")
    return moment.strftime("%Y-%m-%d")


# --- the chart ------------------------------------------------------------------------------------


def time_series_svg(
    points: Sequence[ChartPoint],
    *,
    chart_id: str,
    title: str,
    description: str,
    y_format: Callable[[float], str] = format_count,
    y_from_zero: bool = True,
    y_steps: Sequence[float] | None = None,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> SafeString:
    """An SVG time series (x = time, y = value); one <circle class="point">
    per point, in time order. Safe to put in a page as it is: every label,
    title and id is escaped as it is written."""
    points = sorted(points, key=lambda p: p.at)
    chart_id = escape(chart_id)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{chart_id}" role="img" '
        f'viewBox="0 0 {width} {height}" aria-labelledby="{chart_id}-title {chart_id}-desc">'
        f'<title id="{chart_id}-title">{escape(title)}</title>'
        f'<desc id="{chart_id}-desc">{escape(description)}</desc>'
    )
    if not points:
        return mark_safe(  # noqa: S308 - every text in the chart is escaped above
            head + f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" class="chart-empty">'
            "No data yet</text></svg>"
        )
    xs = [p.at.timestamp() for p in points]
    ys = [float(p.value) for p in points]
    x_low, x_high = min(xs), max(xs)
    if x_high - x_low < 1:
        x_low, x_high = x_low - 1800, x_high + 1800
    y_low = min(0.0, min(ys)) if y_from_zero else min(ys)
    y_high = max(ys)
    if y_high - y_low <= 0:
        # One value: a time axis shows the half hour around it (10 % of an epoch is years).
        pad = 1800.0 if y_steps is TIME_STEPS else (abs(y_high) * 0.1 or 1.0)
        y_low, y_high = (y_low if y_from_zero else y_low - pad), y_high + pad
    y_step = nice_step(y_high - y_low, 4, y_steps)
    y_low = math.floor(y_low / y_step) * y_step
    y_high = math.ceil(y_high / y_step) * y_step
    y_values = ticks(y_low, y_high, y_step)
    y_labels = list(zip(y_values, axis_labels(y_values, y_format), strict=True))
    # Room for the longest y label (a time axis says "25 Nov 00:00"): 11 px text, ~6.5 px a character.
    left = max(LEFT, 12 + round(6.5 * max(len(label) for _value, label in y_labels)))
    plot_w, plot_h = width - left - RIGHT, height - TOP - BOTTOM

    def sx(x: float) -> float:
        return round(left + (x - x_low) / (x_high - x_low) * plot_w, 1)

    def sy(y: float) -> float:
        return round(TOP + plot_h - (y - y_low) / (y_high - y_low) * plot_h, 1)

    parts = [head, '<g class="axis">']
    for value, label in y_labels:
        y = sy(value)
        parts.append(
            f'<line class="grid" x1="{left}" x2="{left + plot_w}" y1="{y}" y2="{y}" stroke="#e6e9ef"/>'
            f'<text x="{left - 6}" y="{y + 4}" text-anchor="end" font-size="11" fill="#5a6372">{escape(label)}</text>'
        )
    x_span = x_high - x_low
    for value in ticks(x_low, x_high, nice_step(x_span, 5, TIME_STEPS)):
        x = sx(value)
        parts.append(
            f'<line class="tick" x1="{x}" x2="{x}" y1="{TOP + plot_h}" y2="{TOP + plot_h + 4}" stroke="#8a94a6"/>'
            f'<text x="{x}" y="{height - 8}" text-anchor="middle" font-size="11" fill="#5a6372">{escape(format_time(value, x_span))}</text>'
        )
    parts.append(
        f'<line class="baseline" x1="{left}" x2="{left + plot_w}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" stroke="#8a94a6"/></g>'
    )
    if len(points) > 1:
        path = " ".join(f"{sx(x)},{sy(y)}" for x, y in zip(xs, ys, strict=True))
        parts.append(
            f'<polyline class="series" points="{path}" fill="none" stroke="#1f5fbf" stroke-width="2"/>'
        )
    for point, x, y in zip(points, xs, ys, strict=True):
        css = f"point {escape(point.css)}".strip()
        key = f' data-key="{escape(point.key)}"' if point.key else ""
        parts.append(
            f'<circle class="{css}" cx="{sx(x)}" cy="{sy(y)}" r="4" fill="{FAILED_FILL if point.css in FAILED_CSS else POINT_FILL}"{key}><title>{escape(point.label)}</title></circle>'
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every label and title is escaped as it is added
