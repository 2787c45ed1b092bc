"""A job's status says what it delivered: rows published and the watermark checked in, beside the
rows it read and rejected; a FAIL message counts every failed range."""

from __future__ import annotations

from typing import Any

from portal.pipeline.destinations.delivery import delivery, failure_summary


def _task(index: int, status: str, low: str, high: str, read: int, written: int, rejected: int = 0) -> dict:
    return {
        "task_id": f"t{index}",
        "dataset_urn": "flights",
        "status": status,
        "low_watermark": low,
        "expected_high_watermark": high,
        "actual_high_watermark": high if status == "SUCCEEDED" else low,
        "records_extracted": read,
        "records_rejected": 0,
        "work_unit": {"range_index": index},
        "branches": [
            {"index": 0, "status": status, "records_written": written, "records_rejected": rejected}
        ],
        "quality": [
            {"policy": "NotNullPolicy", "type": "FAIL", "scope": "branch 0", "failed_records": rejected}
        ]
        if status == "FAILED"
        else [],
    }


def _spec(policy: str) -> dict[str, Any]:
    return {"job_name": "j", "execution_id": 1, "properties": {"job.commit.policy": policy}}


RANGES = [
    _task(0, "SUCCEEDED", "0", "85444", 85444, 85444),
    _task(1, "FAILED", "85444", "170888", 85444, 0, rejected=999),
    _task(2, "SUCCEEDED", "170888", "256332", 85444, 85444),
    _task(3, "FAILED", "256332", "341776", 85444, 0, rejected=3160),
]


def test_a_run_that_committed_nothing_delivered_nothing_and_kept_its_watermark() -> None:
    figures = delivery(_spec("full"), RANGES)
    assert (figures.read, figures.delivered, figures.rejected) == (341776, 0, 4159)
    assert figures.watermarks == {"flights": "0"}


def test_a_partial_commit_reports_the_stored_watermark_and_what_it_published() -> None:
    figures = delivery(_spec("successful"), RANGES)
    assert (figures.delivered, figures.watermarks) == (85444, {"flights": "85444"})


def test_a_dataset_whose_commit_did_not_finish_delivered_nothing() -> None:
    ok = [t for t in RANGES if t["status"] == "SUCCEEDED"]
    ok[1] = {**ok[1], "work_unit": {"range_index": 1}, "low_watermark": "85444"}
    assert delivery(_spec("full"), ok).delivered == 170888
    assert delivery(_spec("full"), ok, committed_datasets=[]).delivered == 0


def test_the_fail_message_sums_every_failed_range() -> None:
    failed = [t for t in RANGES if t["status"] == "FAILED"]
    assert failure_summary(failed, 4) == (
        "2 of 4 task(s) failed: row policy NotNullPolicy (FAIL) failed on 4,159 record(s) in 2 task(s)"
    )
    other = [{**failed[0], "quality": [], "error": "disk full"}]
    assert failure_summary(other, 4) == "1 of 4 task(s) failed: disk full"
