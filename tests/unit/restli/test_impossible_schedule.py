"""Gobblin's clients send Quartz schedules: one that can never fire (February 30th) is refused
like through the API and the form, naming the schedule, and nothing is saved."""

from __future__ import annotations

import pytest

from portal.flows.models import FlowConfig
from tests.builders.restli import flow_config

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("packs")]


def test_a_quartz_schedule_that_never_fires_is_refused(wire, topology):
    body = flow_config(schedule={"cronSchedule": "0 0 0 30 2 ?", "runImmediately": False})
    response = wire.send("POST", "/flowconfigsV2", body, "create")
    assert 400 <= response.status_code < 500, response.content
    message = response.json()["message"]
    assert "never fires" in message and "February" in message
    assert not FlowConfig.objects.exists()
