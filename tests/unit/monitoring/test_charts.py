"""A chart's y axis never says the same label twice: a watermark chart of large numbers close
together read "1.8T, 1.8T, 1.8T" (issue #49, point 11)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from portal.monitoring.charts import ChartPoint, axis_labels, format_count, format_duration, time_series_svg


def test_close_large_counts_get_the_digits_that_tell_them_apart():
    values = [1_796_376_889_950.0, 1_796_376_889_955.0, 1_796_376_889_960.0]
    labels = axis_labels(values, format_count)
    assert len(set(labels)) == 3 and all(labels)
    assert axis_labels([0.0, 250.0, 500.0], format_count) == ["0", "250", "500"]  # as before


def test_a_label_another_format_repeats_is_left_blank():
    assert axis_labels([10.2, 10.4, 12.0], format_duration) == ["10s", "", "12s"]


def test_the_rendered_axis_of_a_watermark_chart_repeats_nothing():
    start = datetime(2026, 12, 1, tzinfo=UTC)
    points = [ChartPoint(start + timedelta(hours=n), 1_796_376_889_950 + 3 * n, f"run {n}") for n in range(4)]
    svg = str(
        time_series_svg(points, chart_id="wm", title="Watermark", description="per run", y_from_zero=False)
    )
    axis = svg.split('<g class="axis">')[1].split("</g>")[0]
    y_texts = re.findall(r'text-anchor="end"[^>]*>([^<]*)<', axis)
    assert len(y_texts) >= 3 and len(set(y_texts)) == len(y_texts), y_texts
