"""A re-created flow starts fresh, run by a real worker on Spark:
olivia's flow reads ids 1-10 and checks in watermark 10; she deletes it,
oscar, her teammate in the group that owns the flow group, creates a flow of
the same group/name, and its first run reads from the start again instead of
continuing after olivia's watermark."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from portal.flows import services as flow_services
from portal.flows.models import FlowGroup
from portal.orchestration import services
from portal.orchestration.models import DatasetState, ExecutionStatus
from tests.builders.stack import SOURCE, finished, make_flow

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_flow_re_created_by_another_user_reads_from_the_start(lake, worker, scheduler):
    team = Group.objects.create(name="it-team")
    olivia = get_user_model().objects.create(username="olivia")
    oscar = get_user_model().objects.create(username="oscar")
    team.user_set.add(olivia, oscar)
    FlowGroup.objects.create(name="it", owner_group=team)
    olivias = make_flow(name="shared-name")
    first = finished(services.run_now(olivias, user=olivias.owner))
    assert first.status == ExecutionStatus.COMMITTED, first.message
    assert first.jobs.get().high_watermark == "10"
    flow_services.delete_flow(olivias)

    oscars = flow_services.create_flow(
        owner=oscar,
        data={
            "flow_group": "it",
            "flow_name": "shared-name",
            "source": "landing",
            "destinations": ["lake"],
            "properties": {"source.class": SOURCE, "writer.output.format": "json", "numbers.per.run": "10"},
            "paused": True,  # no schedule = run once on save; this story runs it itself
        },
    )
    oscars = flow_services.set_paused(oscars, False)
    second = finished(services.run_now(oscars, user=oscar))
    assert second.status == ExecutionStatus.COMMITTED, second.message
    job = second.jobs.get()
    assert (job.low_watermark, job.high_watermark) == ("", "10")  # from the start, not after 10
    rows = DatasetState.objects.filter(flow_group="it", flow_name="shared-name").order_by("pk")
    assert [(r.owner_id, r.watermark) for r in rows] == [(olivias.owner_id, "10"), (oscar.pk, "10")]
