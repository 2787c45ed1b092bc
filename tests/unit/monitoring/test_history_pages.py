"""A flow's run chart (one point per finished execution) and a dataset's
watermark history (charted when plottable, always as a table)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.template import Context, Template
from django.urls import reverse
from django.utils import timezone

from portal.monitoring.charts import (
    ChartPoint,
    format_duration,
    format_time,
    nice_step,
    ticks,
    time_series_svg,
)
from portal.monitoring.history import watermark_point
from portal.orchestration.models import DatasetStateHistory
from portal.orchestration.state import statestore
from tests.builders.executions import finished_run, make_execution
from tests.unit.tables import assert_cells_name_their_columns

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def _chart_url(group="sales", name="orders"):
    return reverse("monitoring:flow_chart", args=[group, name])


def _svg(html: str, chart: str) -> str:
    match = re.search(rf'<svg[^>]*id="{chart}[^"]*".*?</svg>', html, flags=re.S)
    assert match, f"no {chart} chart"
    return match.group(0)


def test_the_flow_chart_has_one_point_per_finished_execution(signed_in, flow):
    runs = [
        finished_run(flow, minutes_ago=90, seconds=30, records=100),
        finished_run(flow, minutes_ago=60, seconds=45, records=250),
        finished_run(flow, minutes_ago=30, seconds=600, records=0, status="FAILED"),
    ]
    make_execution(flow, status="SKIPPED")  # did nothing: not charted
    make_execution(flow_group="other", flow_name="orders", status="COMMITTED")  # another flow
    html = signed_in.get(_chart_url()).content.decode()
    records, duration = _svg(html, "records"), _svg(html, "duration")
    for svg in (records, duration):
        points = re.findall(r'<circle class="point ([a-z]+)"[^>]*data-key="(\d+)"', svg)
        assert [int(key) for _css, key in points] == [run.execution_id for run in runs]  # oldest first
        assert [css for css, _key in points] == ["committed", "committed", "failed"]
    assert "250 records" in records and "10m" in duration
    assert 'role="img"' in records and "<title" in records
    # The same numbers as a table, linking to each execution.
    for run in runs:
        assert f'href="/executions/sales/orders/{run.execution_id}/"' in html
    assert_cells_name_their_columns(html)


def test_the_chart_polls_while_the_flow_runs_and_stops_after(signed_in, flow):
    finished_run(flow, minutes_ago=10, seconds=5, records=1)
    running = make_execution(flow, status="RUNNING", jobs=[{"status": "RUNNING"}])
    html = signed_in.get(_chart_url(), headers=HTMX).content.decode()
    assert 'hx-trigger="every 10s"' in html
    running.status, running.ended_at = "COMMITTED", timezone.now()
    running.save()
    done = signed_in.get(_chart_url(), headers=HTMX)
    assert done.status_code == 286  # htmx stops polling and swaps in the final chart
    assert "hx-trigger" not in done.content.decode()
    assert done.content.decode().count('<circle class="point') == 4


def test_the_flow_page_includes_the_chart_in_place(flow):
    finished_run(flow, minutes_ago=5, seconds=5, records=7)
    html = Template("{% load monitoring %}{% flow_chart flow.flow_group flow.flow_name %}").render(
        Context({"flow": flow})
    )
    assert 'id="flow-chart-sales-orders"' in html
    assert html.count('<circle class="point') == 2


def test_the_chart_of_an_unknown_flow_is_404_and_anonymous_users_log_in(signed_in, client):
    assert signed_in.get(_chart_url("nobody", "nothing")).status_code == 404
    signed_in.logout()
    assert client.get(_chart_url()).status_code == 302


def test_the_chart_lists_the_flows_datasets(signed_in, flow):
    statestore.check_in(
        flow_group="sales",
        flow_name="orders",
        job_name="sales.orders.1-a-to-b",
        dataset_urn="public.orders",
        watermark='{"value":"42","seen":[1,2]}',
        execution_id=1,
        status="COMMITTED",
    )
    html = signed_in.get(_chart_url()).content.decode()
    assert 'href="/monitoring/datasets/sales/orders/sales.orders.1-a-to-b/public.orders/"' in html
    assert "<code>42</code>" in html
    assert_cells_name_their_columns(html)


def _history(watermarks, *, urn="public.orders", records=10):
    state = None
    for index, watermark in enumerate(watermarks):
        state = statestore.check_in(
            flow_group="sales",
            flow_name="orders",
            job_name="sales.orders.1-a-to-b",
            dataset_urn=urn,
            watermark=watermark,
            execution_id=1000 + index,
            status="COMMITTED",
            records=records * (index + 1),
        )
    # Spread the runs over time as real runs would be.
    for index, entry in enumerate(DatasetStateHistory.objects.filter(state=state).order_by("id")):
        DatasetStateHistory.objects.filter(pk=entry.pk).update(
            created=timezone.now() - timedelta(hours=len(watermarks) - index)
        )
    return state


def _dataset_url(state):
    return reverse(
        "monitoring:dataset", args=[state.flow_group, state.flow_name, state.job_name, state.dataset_urn]
    )


def test_a_dataset_page_charts_numeric_watermarks_and_lists_every_run(signed_in, flow):
    state = _history(["100", "250", "400"])
    response = signed_in.get(_dataset_url(state))
    assert response.status_code == 200
    html = response.content.decode()
    watermark = _svg(html, f"dataset-{state.pk}-watermark")
    assert watermark.count('<circle class="point') == 3
    assert "Watermark of public.orders" in watermark
    assert html.count('<circle class="point') == 6  # and records per run
    table = html.split('id="dataset-table"')[1]
    for value, execution_id in (("100", 1000), ("250", 1001), ("400", 1002)):
        assert f"<code>{value}</code>" in table
        assert f'href="/executions/sales/orders/{execution_id}/"' in table
    assert 'href="/flows/sales/orders/"' in html
    assert_cells_name_their_columns(html)  # legible as stacked cards on a phone


def test_file_and_timestamp_watermarks_are_plotted_as_times(signed_in, flow):
    state = _history(
        ["001767225600000:in/a.csv", "001767229200000:in/b.csv", "not-a-time"],
        urn="file:///data/landing/orders",
    )
    html = signed_in.get(_dataset_url(state)).content.decode()
    assert _svg(html, f"dataset-{state.pk}-watermark").count('<circle class="point') == 2
    assert "1 watermark not plotted" in html
    assert "not-a-time" in html.split('id="dataset-table"')[1]


def test_a_single_file_watermark_gets_a_readable_time_axis(signed_in, flow):
    state = _history(["001767225600000:in/a.csv"], urn="file:///data/landing/orders")
    watermark = _svg(signed_in.get(_dataset_url(state)).content.decode(), f"dataset-{state.pk}-watermark")
    labels = re.findall(r'text-anchor="end"[^>]*>([^<]+)</text>', watermark)
    assert len(labels) >= 2 and len(set(labels)) == len(labels), labels  # one distinct time per tick
    assert all(re.fullmatch(r"\d\d:\d\d", label) for label in labels), labels


def test_unplottable_watermarks_still_get_their_table(signed_in, flow):
    state = _history(['{"a": "x"}', "abc"], urn="weird?urn#with%chars")
    url = _dataset_url(state)
    assert "%3F" in url and "%23" in url
    html = signed_in.get(url).content.decode()
    assert f'id="dataset-{state.pk}-watermark' not in html
    assert "not numbers or times" in html
    assert "abc" in html.split('id="dataset-table"')[1]


def test_an_unknown_dataset_is_404(signed_in, flow):
    url = reverse("monitoring:dataset", args=["sales", "orders", "job", "nothing"])
    assert signed_in.get(url).status_code == 404


@pytest.mark.parametrize(
    ("watermark", "expected"),
    [
        ("12345", ("number", 12345.0)),
        ("-3.5", ("number", -3.5)),
        ("2026-03-01T12:00:00Z", ("time", 1772366400.0)),
        ("2026-03-01", ("time", 1772323200.0)),
        ("001772366400000:dir/file.csv", ("time", 1772366400.0)),
        ('{"value": "7", "seen": [1]}', ("number", 7.0)),
        ("nan", None),
        ("", None),
        ("orders-2026", None),
    ],
)
def test_watermark_values_that_can_be_plotted(watermark, expected):
    assert watermark_point(watermark) == expected


def test_chart_scales():
    assert nice_step(100, 4) == 25
    assert nice_step(0.9, 4) == 0.25
    assert nice_step(5000, 4, (60, 300, 600, 1800, 3600)) == 1800
    assert ticks(0, 100, 25) == [0, 25, 50, 75, 100]
    assert (
        format_duration(42) == "42s" and format_duration(125) == "2m 5s" and format_duration(7260) == "2h 1m"
    )


def test_long_y_labels_such_as_times_fit_left_of_the_plot():
    start = timezone.now()
    points = [
        ChartPoint(start + timedelta(days=day), (start + timedelta(days=day)).timestamp(), "run")
        for day in range(3)
    ]
    svg = time_series_svg(
        points,
        chart_id="marks",
        title="t",
        description="d",
        y_format=lambda v: format_time(v, 2 * 86400),
        y_from_zero=False,
    )
    for x, label in re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="end"[^>]*>([^<]+)</text>', svg):
        assert float(x) - 6.5 * len(label) >= 0, f"{label!r} is cut off at the left"


def test_a_two_hop_run_charts_what_its_destination_received(signed_in, flow):
    """3,000,000 rows landed in the lake, then went on to the archive: the run
    delivered 3,000,000, not 6,000,000."""
    now = timezone.now()
    hop = {"status": "COMMITTED", "processed_count": 3_000_000, "started_at": now, "ended_at": now}
    make_execution(
        flow,
        status="COMMITTED",
        created=now,
        started=now,
        ended=now,
        jobs=[
            {**hop, "job_name": "sales.orders.1-landing-to-lake"},
            {
                **hop,
                "job_name": "sales.orders.2-lake-to-archive",
                "parents": ["sales.orders.1-landing-to-lake"],
            },
        ],
    )
    html = signed_in.get(_chart_url()).content.decode()
    assert "3,000,000" in html and "6,000,000" not in html and "6000000" not in html
