"""The bulk writes: an insert fills every column a model instance would; an
update writes each row's own values, JSON and awkward text included."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.bulk import insert_rows, update_rows
from portal.flows.models import CompiledJobDag
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


@pytest.mark.django_db
def test_an_update_of_many_rows_writes_each_rows_own_json_and_text():
    """A recompile stores a batch of DAGs at once: quotes, backslashes, newlines,
    non-ASCII, nested JSON and empty values must land exactly, row by row."""
    flows = [FlowConfigFactory() for _ in range(3)]
    dags = [CompiledJobDag.objects.create(flow=flow, dag={}, revision=1) for flow in flows]
    tokens = [uuid.uuid4() for _ in flows]
    awkward = ['say "hi"', "back\\slash", "line\nbreak, comma; ünïcode ✓"]
    for n, row in enumerate(dags):
        row.dag = {"jobs": [{"name": awkward[n], "props": {"k": awkward[(n + 1) % 3]}}], "n": n}
        row.topology_token = tokens[n]
        flows[n].compilation_message = awkward[n]
        row.revision = 10 + n
    dags[2].dag = {}  # an empty document too

    update_rows(dags, ["dag", "topology_token", "revision"])
    update_rows(flows, ["compilation_message"])

    stored = {row.flow_id: row for row in CompiledJobDag.objects.filter(flow__in=flows)}
    for n, flow in enumerate(flows):
        assert stored[flow.pk].dag == dags[n].dag
        assert stored[flow.pk].topology_token == tokens[n]
        assert stored[flow.pk].flow.compilation_message == awkward[n]
        assert stored[flow.pk].revision == 10 + n


@pytest.mark.django_db
def test_an_update_touches_only_the_rows_it_is_given():
    flows = [FlowConfigFactory(compilation_message="before") for _ in range(3)]
    flows[0].compilation_message, flows[1].compilation_message = "first", ""

    update_rows(flows[:2], ["compilation_message"])

    messages = dict(
        flows[0]
        .__class__.objects.filter(pk__in=[f.pk for f in flows])
        .values_list("pk", "compilation_message")
    )
    assert messages == {flows[0].pk: "first", flows[1].pk: "", flows[2].pk: "before"}
