"""Mallory, an ordinary tenant, stretches what a tenant is given: nodes in another team's name,
more nodes than a user may make, another owner's database login, and Spark beyond any quota.

A group owns a node only by the hand of one of its members; the per-user node limit holds when
she sends thirty creations at once; a node granted to her for reading shows her neither its
password nor the account it logs in as; and with no quota of her own a default one caps her
flows' cores, memory and priority — through `flow.spark.*` and `flow.spark.conf.*` alike."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth.models import Group
from django.db import connections
from django.test import Client

from portal.quotas.models import Quota
from portal.topology import sharing
from portal.topology.models import DataNode
from tests.builders.api import api_client_for
from tests.builders.world import World
from tests.factories import UserFactory

VICTORS_LOGIN = "victors_db_login"


@pytest.fixture
def team_a(world: World) -> Group:
    """A team mallory is not in, victor is."""
    group = Group.objects.create(name="team-a")
    world.victor.groups.add(group)
    return group


def test_she_cannot_make_a_node_owned_by_a_team_she_is_not_in(world: World, team_a, settings, tmp_path):
    settings.FLOWPORT_DATA_DIR = tmp_path / "data"
    as_owner_grant = world.api().post(
        "/api/datanodes",
        {
            "name": "team-a-things",
            "kind": "files",
            "properties": {"path": "users/mallory/x"},
            "acl": [{"role": "owner", "group": "team-a"}],
        },
        format="json",
    )
    assert as_owner_grant.status_code == 400, as_owner_grant.content
    assert "not a member of a group named 'team-a'" in as_owner_grant.content.decode()
    as_owner = world.api().post(
        "/api/datanodes",
        {
            "name": "team-a-things",
            "kind": "files",
            "properties": {"path": "users/mallory/x"},
            "owner": "team-a",
        },
        format="json",
    )
    assert as_owner.status_code == 400
    assert not DataNode.objects.filter(name="team-a-things").exists()


def test_she_cannot_hand_her_node_to_a_team_she_is_not_in_afterwards(
    world: World, team_a, settings, tmp_path
):
    settings.FLOWPORT_DATA_DIR = tmp_path / "data"
    made = world.api().post(
        "/api/datanodes",
        {"name": "mine", "kind": "files", "properties": {"path": "users/mallory/x"}},
        format="json",
    )
    assert made.status_code == 201, made.content
    acl = [{"role": "owner", "user": "mallory"}, {"role": "owner", "group": "team-a"}]
    moved = world.api().patch("/api/datanodes/mine", {"acl": acl}, format="json")
    assert moved.status_code == 400, moved.content
    assert not DataNode.objects.get(name="mine").grants.filter(group=team_a).exists()


@pytest.mark.django_db(transaction=True)
def test_thirty_creations_at_once_make_no_more_nodes_than_her_limit(settings, tmp_path):
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"
    settings.FLOWPORT_DATA_DIR = tmp_path / "data"
    settings.USER_NODE_MAX_PER_USER = 5
    mallory = UserFactory(username="mallory")
    start = threading.Barrier(30)
    answers: list[int] = []

    def create(n: int) -> None:
        try:
            client = api_client_for(mallory)
            start.wait()
            body = {"name": f"mine-{n}", "kind": "files", "properties": {"path": f"users/mallory/{n}"}}
            answers.append(client.post("/api/datanodes", body, format="json").status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create, args=(n,)) for n in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    made = DataNode.objects.filter(user_made=True, created_by=mallory).count()
    assert made == 5 and answers.count(201) == 5, (made, sorted(answers))
    assert sorted(set(answers)) == [201, 400]


def test_a_reader_of_his_node_sees_neither_his_password_nor_his_login(world: World, settings, tmp_path):
    settings.FLOWPORT_DATA_DIR = tmp_path / "data"
    made = world.api(world.victor).post(
        "/api/datanodes",
        {
            "name": "victor-db",
            "kind": "jdbc",
            "properties": {"url": "jdbc:postgresql://127.0.0.1:5432/victor_sales", "user": VICTORS_LOGIN},
            "secrets": {"password": "his-password"},
        },
        format="json",
    )
    assert made.status_code == 201, made.content
    node = DataNode.objects.get(name="victor-db")
    sharing.grant(node, user=world.victor, role="read", principal={"user": "mallory"})
    api = world.api()
    browser = Client()
    browser.force_login(world.mallory)
    seen = "\n".join(
        [
            api.get("/api/datanodes").content.decode(),
            api.get("/api/datanodes/victor-db").content.decode(),
            api.get("/api/datanodes/victor-db/history").content.decode(),
            browser.get("/topology/").content.decode(),
            browser.get("/topology/datanodes/victor-db/").content.decode(),
        ]
    )
    assert "his-password" not in seen and VICTORS_LOGIN not in seen
    assert VICTORS_LOGIN in world.api(world.victor).get("/api/datanodes/victor-db").content.decode()


# --- quotas ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("flow.spark.cores", "64"),
        ("flow.spark.memory", "500g"),
        ("flow.priority", "500"),
        ("flow.priority", "-5"),
        ("flow.spark.conf.spark.cores.max", "64"),
        ("flow.spark.conf.spark.executor.cores", "64"),
        ("flow.spark.conf.spark.executor.instances", "64"),
        ("flow.spark.conf.spark.executor.memory", "500g"),
        ("flow.spark.conf.spark.driver.memory", "500g"),
        ("flow.spark.conf.spark.dynamicAllocation.maxExecutors", "64"),
    ],
)
def test_with_no_quota_of_her_own_the_default_one_caps_her_flow(world: World, key, value):
    assert not Quota.objects.exists()
    answer = world.post_flow({key: value})
    assert answer.status_code == 400, answer.content
    assert key in answer.content.decode()


def test_within_the_default_quota_her_flow_is_saved(world: World):
    answer = world.post_flow(
        {
            "flow.spark.cores": "1",
            "flow.spark.memory": "512m",
            "flow.spark.conf.spark.executor.memory": "512m",
        }
    )
    assert answer.status_code == 201, answer.content
