"""Stories of a watermark as people read it: a files watermark is its newest file's modification
time and its name, shortened, with the stored value on hover — never ``001796348793911:part-…``."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.monitoring.templatetags.monitoring import watermark
from portal.orchestration.models import DatasetState, DatasetStateHistory
from portal.pipeline import backfills
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db

LONG = "001796348793911:part-00001-3f2a9c1e-7b7d-4e2a-9a51-0c3b2f1d8e44-c000.snappy.parquet"


def test_a_files_watermark_is_its_time_and_a_short_name_with_the_raw_value_on_hover():
    html = str(watermark(LONG))
    short = backfills.shown(LONG, short=True)
    assert short.startswith("2026-12-04 01:46:33 UTC, part-00001-") and short.endswith("snappy.parquet")
    assert "…" in short and len(short.split(", ", 1)[1]) <= backfills.SHORT_NAME
    assert f'title="{LONG}"' in html and f">{short}</code>" in html


def test_a_plain_watermark_is_shown_as_it_is_and_none_as_a_dash():
    assert str(watermark("2026-03-01T10:00:00")) == "<code>2026-03-01T10:00:00</code>"
    assert str(watermark("")) == "—"
    assert backfills.short_name("/srv/data/team/orders/part-1.csv") == "part-1.csv"  # no server folders


def test_the_dataset_page_shows_the_files_watermark_for_people(owner):
    flow = FlowConfigFactory(flow_group="team", flow_name="files", owner=owner)
    state = DatasetState.objects.create(
        flow_id=flow.pk,
        flow_group="team",
        flow_name="files",
        job_name="copy",
        dataset_urn="orders",
        watermark=LONG,
    )
    DatasetStateHistory.objects.create(state=state, watermark=LONG, status="COMMITTED", records=990)
    browser = Client()
    browser.force_login(owner)
    page = browser.get("/monitoring/datasets/team/files/copy/orders/").content.decode()
    assert "2026-12-04 01:46:33 UTC, part-00001-" in page
    assert f">{LONG}<" not in page and f'title="{LONG}"' in page  # raw only on hover
