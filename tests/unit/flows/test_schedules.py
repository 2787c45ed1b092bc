"""Schedules people type, and Gobblin's Quartz ones they import."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError

from portal.flows.schedule_text import describe_schedule
from portal.flows.schedules import next_run_times, to_unix_cron


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("*/5 * * * *", "*/5 * * * *"),
        ("  0   3 * * 1-5 ", "0 3 * * 1-5"),
        ("0 0/5 * * * ?", "0/5 * * * *"),  # Quartz: seconds first, ? for "any"
        ("0 0 12 ? * 2-6", "0 12 * * 1-5"),  # Quartz Monday=2 → unix Monday=1
        ("0 0 12 ? * MON-FRI *", "0 12 * * MON-FRI"),  # with the year field
        ("0 0 12 ? * 1#2", "0 12 * * 0#2"),  # second Sunday
        # A Quartz year stays, in croniter's seven-field form; Gobblin's "never run" is one.
        ("0 0 0 ? 1 1 2050", "0 0 * 1 0 0 2050"),
        ("0 0 12 ? * 2-6 2030-2032", "0 12 * * 1-5 0 2030-2032"),
        ("0 0 * 1 0 0 2050", "0 0 * 1 0 0 2050"),  # the stored form converts to itself
        # Quartz 2.2.3 (Gobblin's pin) reads an increment of 0 as no increment: Gobblin's own
        # test schedule runs at minute 1 of every hour; a range keeps its first value; * stays *.
        ("0 1/0 * ? * *", "1 * * * *"),
        ("0 10-20/0 3 ? * 2/0", "10 3 * * 1"),
        ("0 */0 4 ? * *", "* 4 * * *"),
        ("@daily", "@daily"),
        ("", ""),
    ],
)
def test_a_schedule_is_stored_in_unix_form(given, stored):
    assert to_unix_cron(given) == stored


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("61 * * * *", "minute 61 is outside 0-59"),
        ("0 25 * * *", "hour 25 is outside 0-23"),
        ("* * *", "has 3 fields"),
        ("15 0 12 * * ?", "fires at second '15'"),
        ("0 0 12 ? * * 3000", "year field '3000' is not valid"),
        ("every day", "has 2 fields"),
        ("1/0 * * * *", "not a valid cron expression"),  # unix cron has no step 0
    ],
)
def test_a_bad_schedule_says_why(given, reason):
    with pytest.raises(ValidationError) as error:
        to_unix_cron(given)
    assert reason in error.value.messages[0]


def test_next_run_times_follow_the_schedule():
    after = datetime(2026, 1, 1, 10, 7, tzinfo=UTC)
    times = next_run_times("*/15 * * * *", count=3, after=after)
    assert [t.strftime("%H:%M") for t in times] == ["10:15", "10:30", "10:45"]


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("*/61 * * * *", "minute step /61 is outside 1-59"),
        ("0 */24 * * *", "hour step /24 is outside 1-23"),
        ("0 0 */31 * *", "day-of-month step /31 is outside 1-30"),
        ("0 0 1 */13 *", "month step /13 is outside 1-11"),
    ],
)
def test_a_step_that_cannot_repeat_in_its_field_is_refused(given, reason):
    with pytest.raises(ValidationError) as error:
        to_unix_cron(given)
    assert reason in error.value.messages[0]


@pytest.mark.parametrize("step", range(1, 60))
def test_the_words_for_a_minute_step_agree_with_the_next_runs(step):
    """ "every n minutes" only where the runs really are n minutes apart; else
    the minutes are named, as the next runs show them."""
    expression = f"*/{step} * * * *"
    words = describe_schedule(to_unix_cron(expression))
    runs = next_run_times(expression, count=60 // step + 2, after=datetime(2026, 1, 1, 10, 0, 30, tzinfo=UTC))
    gaps = {int((b - a).total_seconds() // 60) for a, b in itertools.pairwise(runs)}
    if words in ("every minute", f"every {step} minutes"):
        assert gaps == {step}, (expression, words)
    else:
        minutes = [str(m) for m in range(0, 60, step)]
        listed = minutes[0] if len(minutes) == 1 else f"{', '.join(minutes[:-1])} and {minutes[-1]}"
        assert words == f"every hour at minute {listed}", (expression, words)
        assert {run.minute for run in runs} == set(range(0, 60, step))


def test_a_quartz_year_limits_the_runs_to_that_year():
    after = datetime(2026, 1, 1, tzinfo=UTC)
    never_until_2050 = next_run_times(to_unix_cron("0 0 0 ? 1 1 2050"), count=2, after=after)
    assert [t.strftime("%Y-%m-%d %a") for t in never_until_2050] == ["2050-01-02 Sun", "2050-01-09 Sun"]
    assert next_run_times(to_unix_cron("0 0 12 * * ? 2020"), count=2, after=after) == []  # all passed
