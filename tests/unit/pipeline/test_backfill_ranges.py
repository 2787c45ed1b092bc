"""Backfill bounds in the watermark's own terms: numbers, dates and times, file times; a range
outside what was loaded is explained, and each destination's replacement is said in words."""

from __future__ import annotations

from portal.pipeline import backfills
from portal.pipeline.destinations.write_modes import backfill_replacement


def test_bounds_compare_in_their_own_terms() -> None:
    assert backfills.bound_key("42") == backfills.bound_key("42.0")
    assert backfills.bound_key("2024-03-01")[0] == "time"
    files = backfills.bound_key("001709251200000:orders-0002.csv")
    assert files == backfills.bound_key("2024-03-01T00:00:00Z")
    assert backfills.bound_key("last week") is None
    assert backfills.as_bound("001709251200000:orders-0002.csv") == "2024-03-01T00:00:00.000Z"
    assert backfills.shown("001709251200000:orders-0002.csv") == "2024-03-01T00:00:00Z (orders-0002.csv)"


def test_a_range_that_matches_nothing_is_explained() -> None:
    loaded_to = "001709251200000:orders-0002.csv"
    assert backfills.refusal("2024-02-01", "2024-02-15", None, loaded_to) is None
    reason = backfills.refusal("2024-04-01", "2024-05-01", None, loaded_to)
    assert reason == (
        "nothing was loaded after 2024-04-01: the loads so far cover from the first record up to "
        "2024-03-01T00:00:00Z (orders-0002.csv)"
    )
    assert "nothing was loaded up to 5" in backfills.refusal(None, "5", "10", "20")
    assert "is not before high" in backfills.refusal("2024-05-01", "2024-04-01", None, None)
    assert backfills.refusal("anything", "else", None, "10") is None  # not comparable: not refused


def test_each_destination_says_what_a_backfill_replaces() -> None:
    merge = {"writer.write.mode": "merge", "extract.primary.key.fields": "id"}
    assert backfill_replacement(merge, "iceberg", "o", None, "9").startswith("merged by key")
    assert "is replaced whole" in backfill_replacement({}, "files", "o", None, "30", stored="20")
    assert "that the loads of (10, 15] published are replaced" in backfill_replacement(
        {}, "files", "o", "10", "15", stored="20"
    )
