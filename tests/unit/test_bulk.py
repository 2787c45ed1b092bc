"""The scheduler's bulk insert fills every column a model instance would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.bulk import insert_rows
from portal.orchestration.models import ExecutionStatus, FlowExecution
from tests.factories import FlowConfigFactory


@pytest.mark.django_db
def test_rows_that_differ_in_a_few_columns_get_the_models_defaults_for_the_rest():
    flow = FlowConfigFactory()
    ticks = [datetime(2026, 11, 24, 10, minute, tzinfo=UTC) for minute in (0, 5, 10)]
    before = timezone.now()

    inserted = insert_rows(
        FlowExecution,
        {
            "flow_id": [flow.pk] * 3,
            "execution_id": [1, 2, 3],
            "scheduled_at": ticks,
        },
        flow_group=flow.flow_group,
        flow_name=flow.flow_name,
        trigger=FlowExecution.Trigger.SCHEDULE,
    )

    assert inserted == 3
    rows = list(FlowExecution.objects.filter(flow=flow).order_by("execution_id"))
    assert [r.scheduled_at for r in rows] == ticks
    for row in rows:
        assert (row.flow_group, row.flow_name, row.trigger) == (flow.flow_group, flow.flow_name, "SCHEDULE")
        assert row.status == ExecutionStatus.PENDING
        assert row.dag == {} and row.backfill == {} and row.cancel_requested is False
        assert before - timedelta(seconds=1) <= row.created <= timezone.now()


@pytest.mark.django_db
def test_a_column_the_model_does_not_have_or_uneven_columns_are_refused():
    with pytest.raises(ValueError, match="no column"):
        insert_rows(FlowExecution, {"flow_id": [1], "nonsense": [2]})
    with pytest.raises(ValueError, match="same number"):
        insert_rows(FlowExecution, {"flow_id": [1, 2], "execution_id": [1]})
    assert insert_rows(FlowExecution, {"flow_id": []}) == 0


@pytest.mark.django_db
def test_a_duplicate_row_raises_djangos_integrity_error():
    flow = FlowConfigFactory()
    columns = {"flow_id": [flow.pk], "execution_id": [7]}
    constants = {"flow_group": flow.flow_group, "flow_name": flow.flow_name, "trigger": "SCHEDULE"}
    insert_rows(FlowExecution, columns, **constants)
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows(FlowExecution, columns, **constants)
