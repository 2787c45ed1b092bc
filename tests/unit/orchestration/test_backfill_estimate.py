"""Stories of a backfill's preview: before it starts, the page says the range it reads (widened to
whole loads where an appending files destination replaces whole loads) and about how many rows it
reads again — from the recorded loads, never by counting the source; "unknown" when none can say.
A backfill or replay from the first record reads so in words, never as Python's ``None``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import Client

from portal.orchestration import services
from portal.orchestration.models import DatasetState, DatasetStateHistory
from portal.orchestration.state.joblogs import JobLog
from tests.factories import FlowConfigFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory

pytestmark = pytest.mark.django_db

URL = "/executions/sales/orders/backfill/"
HOUR = 3_600_000
T = 1_796_342_400_000  # 2026-12-04 00:00 UTC, in ms


def files_mark(ms: int, name: str = "part-00001.snappy.parquet") -> str:
    return f"{ms:015d}:{name}"


@pytest.fixture
def flow(owner):
    """Three hourly loads of files: 10, 990 and 5 rows."""
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    state = DatasetState.objects.create(
        flow_id=flow.pk, flow_group="sales", flow_name="orders", job_name="hop1", dataset_urn="orders"
    )
    previous = ""
    for hour, rows in ((1, 10), (3, 990), (5, 5)):
        mark = files_mark(T + hour * HOUR)
        DatasetStateHistory.objects.create(
            state=state, previous_watermark=previous, watermark=mark, status="COMMITTED", records=rows
        )
        previous = mark
    DatasetState.objects.filter(pk=state.pk).update(watermark=previous)
    return flow


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def test_a_two_hour_window_inside_one_load_reads_that_load_again_and_says_so(flow):
    estimate = services.backfill_estimate(flow, "orders", iso(T + 2 * HOUR), iso(T + 2 * HOUR + HOUR // 2))
    assert (estimate.rows, estimate.loads) == (990, 1)
    assert estimate.widened  # the files load it cuts through is replaced whole
    assert estimate.whole_after.startswith("2026-12-04T01:00:00Z") and estimate.whole_up_to.startswith(
        "2026-12-04T03:00:00Z"
    )
    assert "from the first record up to 2026-12-04T05:00:00Z" in estimate.covered


def test_a_window_over_every_load_counts_them_all_and_one_after_them_none(flow):
    assert services.backfill_estimate(flow, "orders", None, iso(T + 6 * HOUR)).rows == 1005
    after = services.backfill_estimate(flow, "orders", iso(T + 5 * HOUR), iso(T + 9 * HOUR))
    assert (after.rows, after.loads, after.widened) == (0, 0, False)


def test_a_dataset_without_recorded_loads_is_unknown(flow):
    estimate = services.backfill_estimate(flow, "customers", None, "100")
    assert estimate.rows is None and estimate.after == "" and estimate.up_to == "100"


def test_the_preview_shows_the_range_and_the_rows(owner, flow):
    browser = Client()
    browser.force_login(owner)
    page = browser.post(
        URL, {"dataset": "orders", "low": iso(T + 2 * HOUR), "high": iso(T + 4 * HOUR), "preview": "1"}
    ).content.decode()
    rows = page[page.index('data-test="backfill-rows"') :]
    assert "up to 995" in rows[: rows.index("</dd>")]  # the 990-row load and the 5-row one it cuts into
    backfill_range = page[page.index('data-test="backfill-range"') :]
    assert "after 2026-12-04T02:00:00Z" in backfill_range[: backfill_range.index("</dd>")]
    assert "None" not in page


def test_a_replay_from_the_first_record_reads_so_in_words(owner, flow):
    execution = FlowExecutionFactory(
        flow=flow, status="COMMITTED", trigger="BACKFILL", backfill={"orders": {"low": None, "high": "100"}}
    )
    JobExecutionFactory(execution=execution, job_name="hop1", status="COMMITTED", high_watermark="100")
    browser = Client()
    browser.force_login(owner)
    page = browser.get(f"/executions/sales/orders/{execution.execution_id}/").content.decode()
    assert "from the first record, up to and including <code>100</code>" in page and "None" not in page
    assert "the first record → <code>100</code>" in page  # the job's own watermarks, not "— → 100"


def test_a_task_log_line_from_the_first_record_has_no_none(settings, tmp_path):
    settings.FLOWPORT_LOG_DIR = tmp_path
    log = JobLog(1, "hop1", 1)
    log.task_state({"task_id": "t0", "dataset_urn": "orders", "status": "SUCCEEDED", "low_watermark": None})
    assert (
        log.path.read_text()
        .rstrip()
        .endswith("task t0 orders SUCCEEDED: 0 extracted, watermark the first record -> none")
    )
