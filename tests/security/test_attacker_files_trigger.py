"""A flow started when files arrive in its source folder looks only at files inside its node: a
symlink the owner planted towards a file they were not granted (the master key, another tenant's
data) neither starts the flow when that file changes nor reveals when it did."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.flows.triggers import services as trigger_services
from portal.orchestration.control import triggers
from portal.orchestration.models import FlowExecution
from portal.topology.models import DataNode
from tests.factories import FlowConfigFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


def test_a_symlink_out_of_the_source_node_starts_nothing_when_its_target_changes(owner, tmp_path):
    nodes("inbox", "lake")
    executor("x1", "inbox>lake")
    folder, secret = tmp_path / "inbox", tmp_path / "outside" / "master-key"
    folder.mkdir()
    secret.parent.mkdir()
    secret.write_text("not yours")
    (folder / "key.csv").symlink_to(secret)
    DataNode.objects.filter(name="inbox").update(properties={"path": str(folder)})
    watcher = FlowConfigFactory(
        owner=owner,
        schedule="",
        flow_group="mallory",
        flow_name="watch",
        source="inbox",
        destinations=["lake"],
    )
    trigger_services.save_settings(watcher, {"on_files": True})
    now = timezone.now()
    assert triggers.check_files(now) == 0  # the watch starts

    later = time.time() + 60
    os.utime(secret, (later, later))  # the file outside changes
    assert triggers.check_files(now + timedelta(seconds=60)) == 0
    assert not FlowExecution.objects.filter(flow=watcher).exists()

    # A real arrival inside the node still starts it.
    arrived = folder / "orders.csv"
    arrived.write_text("id\n1\n")
    os.utime(arrived, (later + 5, later + 5))
    assert triggers.check_files(now + timedelta(seconds=120)) == 1
