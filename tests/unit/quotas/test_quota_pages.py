"""Staff set quotas on a page and through the API; everyone sees use against
quota and why their jobs wait."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from portal.orchestration import services
from portal.orchestration.control.actions import process_actions
from portal.quotas.models import Quota
from tests.builders.api import api_client_for
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def x1(db):
    nodes("a", "b")
    return executor("x1", "a>b")


def test_staff_set_a_users_quota_on_the_page(client, staff, owner):
    client.force_login(staff)
    form = client.get("/quotas/new/").content.decode()
    assert 'name="max_concurrent_jobs"' in form
    response = client.post("/quotas/new/", {"scope": "USER", "user": owner.pk, "max_concurrent_jobs": 4})
    assert response.status_code == 302
    quota = Quota.objects.get(user=owner)
    assert (quota.max_concurrent_jobs, quota.updated_by, quota.max_executions_per_hour) == (4, "stella", None)


def test_removing_a_quota_asks_first(client, staff, owner):
    quota = Quota.objects.create(scope="USER", user=owner, max_concurrent_jobs=4, updated_by="stella")
    client.force_login(staff)
    page = client.get("/quotas/").content.decode()
    confirm = page[page.index('<details class="confirm">') :]
    assert confirm.index("Remove…") < confirm.index(f'action="/quotas/{quota.pk}/delete/"')
    assert f"Remove the quota for {owner.username}?" in confirm and "data-cancel" in confirm
    assert client.post(f"/quotas/{quota.pk}/delete/").status_code == 302
    assert not Quota.objects.exists()


def test_the_form_names_the_missing_target_of_its_scope(client, staff):
    client.force_login(staff)
    page = client.post("/quotas/new/", {"scope": "GROUP", "max_concurrent_jobs": 4}).content.decode()
    assert "Choose the group this group quota is for." in page
    assert not Quota.objects.exists()


def test_only_staff_change_quotas(client, owner):
    client.force_login(owner)
    assert client.get("/quotas/new/").status_code == 403
    assert client.get("/quotas/").status_code == 200  # looking is for everyone


def test_the_page_shows_use_against_quota_and_why_a_job_waits(client, owner, x1):
    team = Group.objects.create(name="team-a")
    Quota.objects.create(
        scope=Quota.Scope.USER, user=owner, max_concurrent_jobs=1, max_executions_per_hour=10
    )
    Quota.objects.create(scope=Quota.Scope.GROUP, group=team, max_concurrent_jobs=4)
    Quota.objects.create(scope=Quota.Scope.EXECUTOR, executor=x1, max_concurrent_jobs=8)
    flow = FlowConfigFactory(
        owner=owner,
        flow_group="demo",
        flow_name="f",
        schedule="",
        source="a",
        destinations=["b"],
        properties={"flow.allowConcurrentExecution": "true"},
    )
    services.run_now(flow, user=owner), services.run_now(flow, user=owner)
    process_actions()
    client.force_login(owner)
    page = client.get("/quotas/").content.decode()
    assert "<td>olivia</td>" in page and "<td>1 of 1</td>" in page  # in flight
    assert "<td>2 of 10</td>" in page  # executions this hour
    assert "<td>group team-a</td>" in page and "<td>0 of 4</td>" in page
    assert "<td>executor x1</td>" in page and "<td>1 of 8</td>" in page
    assert "<td>waiting: olivia at 1 of 1 concurrent jobs</td>" in page


def test_staff_manage_quotas_through_the_api(staff, x1):
    api = api_client_for(staff)
    alice = UserFactory(username="alice")
    created = api.post(
        "/api/quotas", {"scope": "USER", "user": "alice", "max_concurrent_jobs": 3}, format="json"
    )
    assert created.status_code == 201, created.content
    assert created.json()["user"] == "alice" and created.json()["updated_by"] == "stella"
    twice = api.post("/api/quotas", {"scope": "USER", "user": "alice"}, format="json")
    assert twice.status_code == 400 and "already has a quota" in str(twice.json()["user"])
    missing = api.post("/api/quotas", {"scope": "EXECUTOR"}, format="json")
    assert missing.status_code == 400 and "executor" in missing.json()
    changed = api.patch(f"/api/quotas/{created.json()['id']}", {"max_concurrent_jobs": 5}, format="json")
    assert changed.status_code == 200 and Quota.objects.get(user=alice).max_concurrent_jobs == 5
    assert api.get("/api/quotas").json()["results"][0]["max_concurrent_jobs"] == 5


def test_users_may_not_set_quotas_through_the_api(owner):
    api = api_client_for(owner)
    refused = api.post("/api/quotas", {"scope": "DEFAULT", "max_concurrent_jobs": 100}, format="json")
    assert refused.status_code == 403
    assert not Quota.objects.exists()


def test_staff_weigh_a_user_twice_on_the_page_and_the_api_refuses_a_weight_of_zero(client, staff, owner):
    client.force_login(staff)
    assert client.post("/quotas/new/", {"scope": "USER", "user": owner.pk, "weight": 2}).status_code == 302
    assert Quota.objects.get(user=owner).weight == 2
    assert "<td>2</td>" in client.get("/quotas/").content.decode()
    api = api_client_for(staff)
    assert api.get("/api/quotas").json()["results"][0]["weight"] == 2
    zero = api.post("/api/quotas", {"scope": "DEFAULT", "weight": 0}, format="json")
    assert zero.status_code == 400 and "weight" in zero.json()
    assert api.post("/api/quotas", {"scope": "DEFAULT"}, format="json").json()["weight"] == 1


def test_a_weight_on_a_group_quota_is_refused_naming_where_weights_go(client, staff):
    client.force_login(staff)
    team = Group.objects.create(name="team-a")
    page = client.post("/quotas/new/", {"scope": "GROUP", "group": team.pk, "weight": 3}).content.decode()
    assert "Weights are per user: set it on a user&#x27;s quota or the default." in page
    refused = api_client_for(staff).post(
        "/api/quotas", {"scope": "GROUP", "group": "team-a", "weight": 3}, format="json"
    )
    assert refused.status_code == 400 and "weight" in refused.json()
    assert not Quota.objects.exists()
