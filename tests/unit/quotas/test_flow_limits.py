"""A flow's priority is checked against its owner's quota when it is saved: it
may lower it but not raise it past the owner's limit (refused naming the
property and the quota)."""

from __future__ import annotations

import pytest

from portal.flows.models import FlowConfig
from portal.quotas.models import Quota
from tests.builders.api import api_client_for
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(owner):
    nodes("a", "b")
    executor("x1", "a>b")
    Quota.objects.create(
        scope=Quota.Scope.USER, user=owner, max_priority=5, max_cores_per_job=4, max_memory_mb_per_job=2048
    )
    return api_client_for(owner)


def save(api, **properties):
    body = {
        "flowGroup": "demo",
        "flowName": "f",
        "source": "a",
        "destinations": ["b"],
        "schedule": "0 2 * * *",
        "properties": {"source.files.format": "csv", **properties},
    }
    return api.post("/api/flowconfigs", body, format="json")


def test_a_flow_may_lower_its_priority_and_raise_it_up_to_its_owners_limit(api):
    assert save(api, **{"flow.priority": "-3"}).status_code == 201
    FlowConfig.objects.all().delete()
    assert save(api, **{"flow.priority": "5"}).status_code == 201


def test_a_priority_above_the_owners_limit_is_refused_naming_it(api):
    refused = save(api, **{"flow.priority": "6"})
    assert refused.status_code == 400
    assert refused.json()["properties"] == [
        "flow.priority: 6 is above olivia's quota max priority 5; set it lower"
    ]
    assert save(api, **{"flow.priority": "soon"}).json()["properties"] == [
        "flow.priority: must be a whole number, got 'soon'"
    ]


def test_a_flow_asking_more_spark_than_its_owners_quota_is_refused_naming_the_property(api):
    refused = save(api, **{"flow.spark.cores": "8", "flow.spark.memory": "3g"})
    assert refused.status_code == 400
    assert refused.json()["properties"] == [
        "flow.spark.cores: 8 cores is above olivia's quota of 4 cores per job; set it lower",
        "flow.spark.memory: 3072 MiB is above olivia's quota of 2048 MiB per job; set it lower",
    ]
    assert save(api, **{"flow.spark.memory": "plenty"}).json()["properties"] == [
        "flow.spark.memory: must be a Spark memory size such as 512m or 2g (at least 1m), got 'plenty'"
    ]
    assert save(api, **{"flow.spark.cores": "0"}).status_code == 400
    saved = save(api, **{"flow.spark.cores": "4", "flow.spark.memory": "2g"})
    assert saved.status_code == 201, saved.content
    assert not saved.json().get("warnings")  # known keys, not misspellings
