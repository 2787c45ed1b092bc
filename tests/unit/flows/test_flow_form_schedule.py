"""Schedules in words for the flow form (schedule_text.describe_schedule and
schedule_preview): what a person reads next to the cron field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from portal.flows.schedule_text import describe_schedule, schedule_preview
from portal.flows.schedules import to_unix_cron


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("", "runs once, as soon as it is saved (no schedule)"),
        ("* * * * *", "every minute"),
        ("*/5 * * * *", "every 5 minutes"),
        ("0/15 * * * *", "every 15 minutes"),
        ("0 * * * *", "every hour, on the hour"),
        ("@hourly", "every hour, on the hour"),
        ("15 * * * *", "every hour at minute 15"),
        ("0 */6 * * *", "every 6 hours, on the hour"),
        ("30 2 * * *", "at 02:30 every day"),
        ("0 9,17 * * *", "at 09:00 and 17:00 every day"),
        ("0 9 * * 1-5", "at 09:00 on Monday through Friday"),
        ("0 9 * * MON-FRI", "at 09:00 on Monday through Friday"),
        ("0 10 * * 0,6", "at 10:00 on Sunday and Saturday"),
        ("0 0 1 * *", "at 00:00 on day 1 of the month"),
        ("0 0 1,15 * *", "at 00:00 on days 1 and 15 of the month"),
        ("0 0 L * *", "at 00:00 on the last day of the month"),
        ("0 8 * * 1#1", "at 08:00 on the first Monday of the month"),
        ("0 8 * * L5", "at 08:00 on the last Friday of the month"),
        ("0 0 1 1 *", "at 00:00 on day 1 of the month in January"),
        ("0 0 1 */3 *", "at 00:00 on day 1 of the month every 3 months"),
        ("0 0 1 jan,jul *", "at 00:00 on day 1 of the month in January and July"),
        ("0 0 13 * 5", "at 00:00 on day 13 of the month or on Friday"),
        ("*/10 9-17 * * 1-5", "every 10 minutes, during hour 9 through 17 on Monday through Friday"),
        ("5,35 */2 * * *", "every 2 hours, at minute 5 and 35"),
        ("@weekly", "every Sunday at 00:00"),
        ("@monthly", "at 00:00 on day 1 of the month"),
        ("@yearly", "at 00:00 on 1 January, every year"),
    ],
)
def test_schedules_in_words(expression, words):
    assert describe_schedule(to_unix_cron(expression)) == words


def test_what_it_cannot_put_in_words_it_names():
    assert describe_schedule("0 0 15W * *") == "on the cron schedule 0 0 15W * *"


def test_preview_of_a_quartz_expression():
    preview = schedule_preview("0 0/5 * * * ?", after=datetime(2026, 1, 5, 9, 2, tzinfo=UTC))
    assert (preview.unix, preview.converted, preview.error) == ("0/5 * * * *", True, "")
    assert preview.description == "every 5 minutes"
    assert [run.strftime("%H:%M") for run in preview.next_runs] == [
        "09:05",
        "09:10",
        "09:15",
        "09:20",
        "09:25",
    ]
    assert preview.time_zone == "UTC"


def test_preview_of_a_bad_expression_has_the_reason_and_no_runs():
    preview = schedule_preview("0 25 * * *")
    assert preview.errors == ["'0 25 * * *' is not a valid cron expression: hour 25 is outside 0-23."]
    assert preview.next_runs == [] and preview.description == ""
