"""Real rows for the monitoring stories: flows, executions with their jobs,
executors and worker heartbeats."""

from __future__ import annotations

import pytest

from portal.topology.models import SpecExecutor
from tests.factories import FlowConfigFactory


@pytest.fixture
def flow(owner):
    return FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner, properties={})


@pytest.fixture
def executor(db):
    return SpecExecutor.objects.create(
        name="local",
        uri="flowport://executors/local",
        queue="executor.local",
        spark_master="local[*]",
        technology="spark-local",
    )


@pytest.fixture
def signed_in(client, owner):
    client.force_login(owner)
    return client
