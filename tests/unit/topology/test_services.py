"""Topology catalog rules: bad input is refused with field + reason and
nothing is half-saved; every change is one event and a new revision."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from portal.topology import services
from portal.topology.graph import current_snapshot
from portal.topology.models import Capability, DataNode, SpecExecutor
from portal.topology.signals import topology_catalog_changed
from portal.topology.validators import spark_master_kind
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("master", "kind"),
    [
        ("local", "local"),
        ("local[4]", "local"),
        ("local[*]", "local"),
        ("spark://10.0.0.1:7077", "standalone"),
        ("spark://m1:7077,m2:7077", "standalone"),
        ("yarn", "yarn"),
        ("k8s://https://k8s.example.org:6443", "k8s"),
        ("spark://nohost", None),
        ("spark://h:99999", None),
        ("local[0]", None),
        ("mesos://x:5050", None),
        ("", None),
        ("k8s://ftp://x", None),
    ],
)
def test_spark_master_forms(master, kind):
    assert spark_master_kind(master) == kind


def test_unparseable_spark_master_is_refused_and_not_saved():
    with pytest.raises(ValidationError) as error:
        executor("x", spark_master="spark://nohost")
    assert "is not a Spark master URL" in error.value.message_dict["spark_master"][0]
    assert not SpecExecutor.objects.exists()


def test_master_must_fit_the_technology():
    with pytest.raises(ValidationError) as error:
        executor("x", technology="yarn", spark_master="local[*]")
    assert error.value.message_dict["spark_master"] == ["'local[*]' does not fit technology 'yarn'."]


def test_duplicate_executor_name_is_refused():
    executor("x")
    with pytest.raises(ValidationError) as error:
        executor("x")
    assert error.value.message_dict["name"] == ["Spec executor with this Name already exists."]
    assert SpecExecutor.objects.count() == 1


def test_capability_with_unknown_data_node_saves_nothing():
    nodes("a")
    with pytest.raises(ValidationError) as error:
        executor("x", "a>ghost")
    assert error.value.message_dict["capabilities"] == ["a → ghost: unknown destination data node 'ghost'"]
    assert not SpecExecutor.objects.exists()
    assert not Capability.objects.exists()


def test_clear_text_secret_in_connection_properties_is_refused():
    with pytest.raises(ValidationError) as error:
        services.create_data_node({"name": "db", "kind": "jdbc", "properties": {"password": "hunter2"}})
    assert "looks like a secret" in error.value.message_dict["properties"][0]
    node = services.create_data_node({"name": "db", "kind": "jdbc", "properties": {"password": "ENC(abc)"}})
    assert node.properties == {"password": "ENC(abc)"}


def test_data_node_in_use_cannot_be_deleted():
    a, _b = nodes("a", "b")
    executor("x", "a>b")
    with pytest.raises(ValidationError) as error:
        services.delete_data_node(a)
    assert error.value.message_dict["name"] == [
        "Data node 'a' is used by capabilities of x; remove them first."
    ]
    assert DataNode.objects.filter(name="a").exists()


def test_every_change_sends_one_event_and_moves_the_revision():
    events = []

    def listen(sender, action, kind, instance, **kwargs):
        events.append((kind, action, getattr(instance, "name", None)))

    topology_catalog_changed.connect(listen)
    try:
        nodes("a", "b")
        before = services.current_revision()
        x = executor("x", "a>b")
        assert services.current_revision() != before
        services.set_enabled(x, False)
        services.delete_executor(x)
    finally:
        topology_catalog_changed.disconnect(listen)
    assert events == [
        ("datanode", "add", "a"),
        ("datanode", "add", "b"),
        ("executor", "add", "x"),
        ("executor", "update", "x"),
        ("executor", "delete", "x"),
    ]


def test_snapshot_is_cached_per_revision_and_rebuilt_after_a_change(django_assert_num_queries):
    nodes("a", "b")
    first = current_snapshot()
    with django_assert_num_queries(1):
        assert current_snapshot() is first
    executor("x", "a>b")
    second = current_snapshot()
    assert second is not first
    assert [edge.executor for edge in second.adjacency["a"]] == ["x"]


def test_heartbeat_alone_is_not_a_topology_change():
    nodes("a", "b")
    executor("x", "a>b")
    services.record_health("x", "HEALTHY", "ok")
    revision = services.current_revision()
    services.record_health("x", "HEALTHY", "still ok")
    assert services.current_revision() == revision
    services.record_health("x", "UNHEALTHY", "lost")
    assert services.current_revision() != revision
    with pytest.raises(ValidationError):
        services.record_health("x", "SO-SO")
