"""Every page and API endpoint of the URL map, asked by six people: the flow's
and pack's owner (olivia), a member of the flow's owning group (mia), a
reader of the pack (rita), an outsider (oscar), staff (stella) and an
anonymous visitor. Each route is declared below with the access it has; a
route added without a declaration fails here, and so does a declared kind
whose objects have no rule registered with accounts.access.

The data node routes are asked about olivia's own node (`own-a`, user-made):
she owns it, mia is granted it (a read grant to her group), rita asked for it
and waits, oscar is an outsider."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from portal.accounts import access
from portal.accounts.models import ApiToken
from portal.accounts.tokens import create_token
from portal.flows.models import FlowConfig
from portal.flows.versions import services as versions
from portal.keys.models import CustomerKey
from portal.monitoring.models import Subscription
from portal.orchestration.models import FlowExecution
from portal.templatepacks.models import TemplatePack
from portal.topology.models import Capability, DataNode, DataNodeAccessRequest, DataNodeGrant, SpecExecutor
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.orchestration.factories import FlowExecutionFactory, JobExecutionFactory
from tests.unit.templatepacks.factories import make_pack

PEOPLE = ("owner", "member", "reader", "outsider", "staff", "anonymous")

# What a person gets: the page or answer (ok), the login page / 401 (login),
# a refusal (denied: 403) or nothing at all (hidden: 404).
OK, LOGIN, DENIED, HIDDEN = "ok", "login", "denied", "hidden"


@dataclass(frozen=True)
class Kind:
    """Who gets what, and the model whose registered rule decides it (None:
    decided by being signed in or staff alone)."""

    model: type | None
    owner: str
    member: str
    reader: str
    outsider: str
    staff: str
    anonymous: str = LOGIN


PUBLIC = Kind(None, OK, OK, OK, OK, OK, OK)
SIGNED_IN = Kind(None, OK, OK, OK, OK, OK)
STAFF = Kind(None, DENIED, DENIED, DENIED, DENIED, OK)
FLOW_VIEW = Kind(FlowConfig, OK, OK, OK, OK, OK)
FLOW_CHANGE = Kind(FlowConfig, OK, OK, DENIED, DENIED, OK)
EXECUTION_VIEW = Kind(FlowExecution, OK, OK, OK, OK, OK)
EXECUTION_ACT = Kind(FlowExecution, OK, OK, DENIED, DENIED, OK)
PACK_VIEW = Kind(TemplatePack, OK, HIDDEN, OK, HIDDEN, OK)
PACK_CHANGE = Kind(TemplatePack, OK, HIDDEN, DENIED, HIDDEN, DENIED)
TOPOLOGY_VIEW = Kind(SpecExecutor, OK, OK, OK, OK, OK)
TOPOLOGY_CHANGE = Kind(SpecExecutor, DENIED, DENIED, DENIED, DENIED, OK)
# A user-made data node: its owners (and staff) change, delete and share it.
NODE_CHANGE = Kind(DataNode, OK, DENIED, DENIED, DENIED, OK)
KEYS = Kind(CustomerKey, OK, OK, OK, OK, OK)
# An API token is its own user's: anyone else's id names nothing.
OWN_TOKEN = Kind(ApiToken, OK, HIDDEN, HIDDEN, HIDDEN, HIDDEN)
# Logging out (POST) ends at the login page, whoever asks.
LOGOUT = Kind(None, LOGIN, LOGIN, LOGIN, LOGIN, LOGIN)
# Routes about rows this world does not hold (a job's stored log, a dataset's state):
# nothing to show to anyone signed in; who reads them is tested beside their pages.
NO_ROW = Kind(None, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN)
STAFF_NO_ROW = Kind(None, DENIED, DENIED, DENIED, DENIED, HIDDEN)
# A data node's page: every signed-in user (its owners, grants and flows; whom to ask).
NODE_PAGE = Kind(DataNode, OK, OK, OK, OK, OK)
# Test connection, discovery and a node's history: whoever holds a grant on it, and staff.
NODE_USE = Kind(DataNode, OK, OK, DENIED, DENIED, OK)
# A flow subscription is its own user's: anyone else's id names nothing.
OWN_SUBSCRIPTION = Kind(None, OK, HIDDEN, HIDDEN, HIDDEN, HIDDEN)
# Those who may act on the execution are let through to the files, which this world has none of.
EXECUTION_ACT_NO_ROW = Kind(FlowExecution, HIDDEN, HIDDEN, DENIED, DENIED, HIDDEN)
# A flow's webhook: its token alone lets a call in (no session counts); without it, nothing is there.
WEBHOOK = Kind(None, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN)

F = "<str:flow_group>/<str:flow_name>"
E = f"{F}/<int:execution_id>"
FA = "<str:flowGroup>/<str:flowName>"
PACK = "packs/<str:name>"
ROUTES: dict[str, Kind] = {
    "": SIGNED_IN,  # redirects to the dashboard (a newcomer's: the start page)
    "login/": PUBLIC,
    "logout/": LOGOUT,
    "favicon.ico": PUBLIC,
    "metrics": SIGNED_IN,  # or Prometheus with MONITORING_METRICS_TOKEN (docs/monitoring.md)
    "monitoring/metrics": SIGNED_IN,  # the same exposition as /metrics
    "api/schema/": SIGNED_IN,  # anyone with API_SCHEMA_PUBLIC
    "api/docs/": SIGNED_IN,
    "flows/": SIGNED_IN,
    "flows/new/": SIGNED_IN,
    f"flows/{F}/": FLOW_VIEW,
    f"flows/{F}/edit/": FLOW_CHANGE,
    f"flows/{F}/pause/": FLOW_CHANGE,
    f"flows/{F}/resume/": FLOW_CHANGE,
    f"flows/{F}/delete/": FLOW_CHANGE,
    f"flows/{F}/versions/": FLOW_VIEW,  # whoever sees the flow sees its versions
    f"flows/{F}/triggers/": FLOW_CHANGE,  # data triggers, freshness goal, webhook token
    f"flows/{F}/webhook-token/": FLOW_CHANGE,
    "account/": SIGNED_IN,
    # Users and groups: staff manage them (tests/unit/accounts/test_people_pages.py).
    "people/": STAFF,
    "people/new/": STAFF,
    "people/<int:user_id>/": STAFF,
    "people/<int:user_id>/active/": STAFF,
    "people/groups/": STAFF,
    "people/groups/<int:group_id>/": STAFF,
    # Each user's own notifications: nobody reads or marks another's (tests/unit/events).
    "notifications/": SIGNED_IN,
    "notifications/read/": SIGNED_IN,
    "account/tokens/new/": SIGNED_IN,
    "account/tokens/<int:token_id>/revoke/": OWN_TOKEN,
    f"{PACK}/flows/": PACK_VIEW,
    "packs/": SIGNED_IN,
    "packs/new/": SIGNED_IN,
    f"{PACK}/": PACK_VIEW,
    f"{PACK}/history/": PACK_VIEW,
    f"{PACK}/upload/": PACK_CHANGE,
    f"{PACK}/acl/": PACK_CHANGE,
    f"{PACK}/request-access/": SIGNED_IN,  # asked by those who cannot see the pack
    f"{PACK}/access-requests/<int:request_id>/": PACK_CHANGE,
    f"{PACK}/delete/": PACK_CHANGE,
    f"{PACK}/versions/<int:number>/": PACK_VIEW,
    f"{PACK}/compare/": PACK_VIEW,
    f"{PACK}/versions/<int:number>/rollback/": PACK_CHANGE,
    f"{PACK}/new-template/": PACK_CHANGE,
    f"{PACK}/templates/<path:path>": PACK_VIEW,
    f"{PACK}/edit/<path:path>": PACK_CHANGE,
    "topology/": TOPOLOGY_VIEW,
    "topology/executors/new/": TOPOLOGY_CHANGE,
    "topology/executors/<str:name>/": TOPOLOGY_VIEW,
    "topology/executors/<str:name>/edit/": TOPOLOGY_CHANGE,
    "topology/executors/<str:name>/toggle/": TOPOLOGY_CHANGE,
    "topology/executors/<str:name>/disable/": TOPOLOGY_CHANGE,
    "topology/executors/<str:name>/delete/": TOPOLOGY_CHANGE,
    "topology/executors/<str:name>/capabilities/": TOPOLOGY_CHANGE,
    "topology/executors/<str:name>/capabilities/<int:pk>/remove/": TOPOLOGY_CHANGE,
    "topology/datanodes/": SIGNED_IN,  # the nodes one may use, and those one may ask for
    "topology/datanodes/new/": SIGNED_IN,  # a node of one's own (topology.policy)
    "topology/datanodes/<str:name>/": NODE_PAGE,
    "topology/datanodes/<str:name>/test/": NODE_USE,
    "topology/datanodes/<str:name>/discover/": NODE_USE,
    "topology/source-picker/": SIGNED_IN,
    "topology/datanodes/<str:name>/edit/": NODE_CHANGE,
    "topology/datanodes/<str:name>/delete/": NODE_CHANGE,
    "topology/datanodes/<str:name>/grants/": NODE_CHANGE,
    "topology/datanodes/<str:name>/grants/<int:grant_id>/revoke/": NODE_CHANGE,
    "topology/datanodes/<str:name>/request-access/": SIGNED_IN,  # asked by those not granted
    "topology/datanodes/<str:name>/access-requests/<int:request_id>/": NODE_CHANGE,
    "executions/": SIGNED_IN,
    f"executions/{E}/": EXECUTION_VIEW,
    f"executions/{E}/kill/": EXECUTION_ACT,
    f"executions/{E}/resume/": EXECUTION_ACT,
    f"executions/{E}/rerun/": EXECUTION_ACT,  # with the version it ran or the current one
    f"executions/{E}/jobs/<str:job_name>/log/": EXECUTION_VIEW,
    f"executions/{E}/jobs/<str:job_name>/rerun/": EXECUTION_ACT,
    f"executions/{E}/jobs/<str:job_name>/log/download/": NO_ROW,
    f"executions/{E}/jobs/<str:job_name>/bad-records/": EXECUTION_ACT_NO_ROW,
    f"executions/{E}/jobs/<str:job_name>/outputs/<int:index>/": EXECUTION_ACT_NO_ROW,
    # The worker's Spark UI through the portal: staff only (it shows every job its worker ran),
    # while the job runs (this world's job has no UI recorded); tests/security/test_spark_ui_proxy.py.
    f"executions/{E}/jobs/<str:job_name>/spark-ui/": STAFF_NO_ROW,
    f"executions/{E}/jobs/<str:job_name>/spark-ui/<path:path>": STAFF_NO_ROW,
    f"executions/{F}/": FLOW_VIEW,
    f"executions/{F}/run/": FLOW_CHANGE,
    f"executions/{F}/backfill/": FLOW_CHANGE,
    "state/": STAFF,
    "state/<int:pk>/": STAFF_NO_ROW,
    "keys/": KEYS,
    "quotas/": SIGNED_IN,  # use against each quota, and why jobs wait
    "quotas/new/": STAFF,
    "quotas/<int:pk>/edit/": STAFF_NO_ROW,
    "quotas/<int:pk>/delete/": STAFF_NO_ROW,
    "api/": SIGNED_IN,  # the index of the API's addresses
    "monitoring/": SIGNED_IN,
    "monitoring/start/": SIGNED_IN,  # a newcomer's next step
    f"monitoring/flows/{F}/chart/": FLOW_VIEW,
    f"monitoring/flows/{F}/subscription/": FLOW_VIEW,
    f"monitoring/flows/{F}/slot/": FLOW_VIEW,
    f"monitoring/flows/{F}/resnapshot/": FLOW_CHANGE,
    "monitoring/subscriptions/<int:subscription_id>/delete/": OWN_SUBSCRIPTION,
    f"monitoring/datasets/{F}/<str:job_name>/<path:dataset_urn>/": NO_ROW,
    "api/flowconfigs/compile": SIGNED_IN,
    f"api/flowconfigs/{FA}/jobs": FLOW_VIEW,
    "api/flowconfigs": SIGNED_IN,
    f"api/flowconfigs/{FA}": FLOW_VIEW,
    "api/me": SIGNED_IN,
    "api/templatepacks": SIGNED_IN,
    "api/templatepacks/<str:name>": PACK_VIEW,
    "api/templatepacks/<str:name>/templates": PACK_VIEW,
    "api/templatepacks/<str:name>/templates/<path:template_path>": PACK_VIEW,
    "api/templatepacks/<str:name>/acl": PACK_VIEW,
    "api/templatepacks/<str:name>/versions": PACK_VIEW,
    "api/templatepacks/<str:name>/versions/<int:number>/rollback": PACK_CHANGE,
    "api/templatepacks/<str:name>/history": PACK_VIEW,
    "api/templates/resolve": SIGNED_IN,
    "api/topologies": TOPOLOGY_VIEW,
    "api/topologies/<str:name>": TOPOLOGY_VIEW,
    "api/datanodes": TOPOLOGY_VIEW,
    "api/datanodes/<str:name>": TOPOLOGY_VIEW,
    "api/datanodes/<str:name>/test": NODE_USE,
    "api/datanodes/<str:name>/discover": NODE_USE,
    "api/datanodes/<str:name>/access-requests": NODE_PAGE,  # ask; owners list the open ones
    "api/datanodes/<str:name>/access-requests/<int:request_id>": NODE_CHANGE,
    "api/datanodes/<str:name>/history": NODE_USE,
    "api/subscriptions": SIGNED_IN,
    "api/subscriptions/<int:subscription_id>": OWN_SUBSCRIPTION,
    f"api/flowstatuses/{FA}": FLOW_VIEW,
    "api/flowexecutions": SIGNED_IN,
    "api/flowexecutions/<int:executionId>": EXECUTION_VIEW,
    "api/flowexecutions/<int:executionId>/kill": EXECUTION_ACT,
    "api/flowexecutions/<int:executionId>/resume": EXECUTION_ACT,
    f"api/flowconfigs/{FA}/run": FLOW_CHANGE,
    f"api/flowconfigs/{FA}/adopt-state": FLOW_CHANGE,
    f"api/flowconfigs/{FA}/resnapshot": FLOW_CHANGE,
    f"api/flowconfigs/{FA}/triggers": FLOW_VIEW,  # changed (PUT) by those who change the flow
    f"api/flowconfigs/{FA}/webhook-token": FLOW_CHANGE,
    f"api/flowconfigs/{FA}/versions": FLOW_VIEW,  # as the versions page
    f"api/flowconfigs/{FA}/versions/<int:number>": FLOW_VIEW,
    f"api/hooks/flows/{FA}": WEBHOOK,  # tests/security/test_attacker_webhook.py
    "api/keys": KEYS,
    "api/keys/wrap": KEYS,
    "api/keys/encrypt": KEYS,
}
# Routes written as regular expressions (Gobblin's Rest.li keys), asked at a sample URL.
REGEX_ROUTES: dict[str, tuple[str, Kind]] = {
    r"api/^flowconfigs/\(flowGroup:": ("/api/flowconfigs/(flowGroup:sales,flowName:orders)", FLOW_VIEW),
    r"api/^flowconfigs/\(flowName:": ("/api/flowconfigs/(flowName:orders,flowGroup:sales)", FLOW_VIEW),
    r"api/^flowstatuses/\(flowGroup:": ("/api/flowstatuses/(flowGroup:sales,flowName:orders)", FLOW_VIEW),
    r"api/^flowstatuses/\(flowName:": ("/api/flowstatuses/(flowName:orders,flowGroup:sales)", FLOW_VIEW),
    r"api/^quotas$": ("/api/quotas", STAFF),
    r"api/^quotas/(?P<pk>": ("/api/quotas/999999", STAFF_NO_ROW),
    r"^flowconfigs/?$": ("/flowconfigs", SIGNED_IN),
    r"^flowconfigs/(?P<key>": ("/flowconfigs/(flowGroup:sales,flowName:orders)", FLOW_VIEW),
    r"^flowconfigsV2/?$": ("/flowconfigsV2", SIGNED_IN),
    r"^flowconfigsV2/(?P<key>": ("/flowconfigsV2/(flowGroup:sales,flowName:orders)", FLOW_VIEW),
    r"^flowstatuses/?$": ("/flowstatuses", SIGNED_IN),
    r"^flowstatuses/(?P<key>": ("/flowstatuses/(flowGroup:sales,flowName:orders)", FLOW_VIEW),
    r"^flowexecutions/?$": ("/flowexecutions", SIGNED_IN),
    r"^flowexecutions/(?P<key>": ("/flowexecutions/(flowGroup:sales,flowName:orders)", FLOW_VIEW),
}


def url_map() -> list[str]:
    """Every route of the portal's URL map but Django's admin site (which has its own staff check)."""

    def walk(patterns, prefix: str = ""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                yield prefix + str(pattern.pattern)

    return [route for route in walk(get_resolver().url_patterns) if not route.startswith("admin/")]


def _regex_entry(route: str) -> tuple[str, Kind] | None:
    return next((entry for prefix, entry in REGEX_ROUTES.items() if route.startswith(prefix)), None)


def test_every_route_of_the_url_map_declares_its_access():
    undeclared = [route for route in url_map() if route not in ROUTES and _regex_entry(route) is None]
    assert undeclared == [], "declare who may use these routes in ROUTES:\n" + "\n".join(undeclared)


def test_every_declared_kind_has_its_rule_registered():
    kinds = {*ROUTES.values(), *(kind for _url, kind in REGEX_ROUTES.values())}
    missing = {kind.model for kind in kinds if kind.model is not None and not access.registered(kind.model)}
    assert missing == set()
    assert all(access.registered(model) for model in (DataNode, SpecExecutor, Capability))


@dataclass
class World:
    people: dict[str, object]
    values: dict[str, str]


@pytest.fixture
def world(db) -> World:
    owner = UserFactory(username="olivia")
    member = UserFactory(username="mia")
    team = Group.objects.create(name="team")
    member.groups.add(team)
    reader = UserFactory(username="rita")
    outsider = UserFactory(username="oscar")
    staff = UserFactory(username="stella", is_staff=True)
    flow = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders", owning_group=team)
    versions.record(flow, by=owner.username)  # version 1, as a save through the service keeps
    pack = make_pack(owner, name="sales-pack", readers=[reader])
    path = pack.current_version.templates.values_list("path", flat=True).first()
    execution = FlowExecutionFactory(flow=flow)
    job = JobExecutionFactory(execution=execution)
    executor = SpecExecutor.objects.create(name="exec-a")
    node = DataNode.objects.create(name="node-a")
    capability = Capability.objects.create(
        executor=executor, source=node, destination=DataNode.objects.create(name="node-b")
    )
    own = DataNode.objects.create(
        name="own-a", user_made=True, created_by=owner, properties={"path": "users/olivia/a"}
    )
    DataNodeGrant.objects.create(node=own, role="owner", user=owner)
    team_grant = DataNodeGrant.objects.create(node=own, role="read", group=team)
    DataNodeAccessRequest.objects.create(node=own, requested_by=reader, role="read")
    token, _key = create_token(owner, name="script")
    subscription = Subscription.objects.create(user=owner, flow=flow)
    people = {"owner": owner, "member": member, "reader": reader, "outsider": outsider, "staff": staff}
    values = {
        "flow_group": "sales",
        "flow_name": "orders",
        "flowGroup": "sales",
        "flowName": "orders",
        "execution_id": str(execution.execution_id),
        "executionId": str(execution.execution_id),
        "job_name": job.job_name,
        "index": "0",
        "path": path,
        "template_path": path,
        "number": "1",
        "pk": str(capability.pk),
        "token_id": str(token.pk),
        "subscription_id": str(subscription.pk),
        "request_id": "1",
        "dataset_urn": "urn",
        "pack": pack.name,
        "executor": executor.name,
        "node": own.name,
        "grant_id": str(team_grant.pk),
        "user_id": str(outsider.pk),
        "group_id": str(team.pk),
    }
    return World(people, values)


def _url(route: str, values: dict[str, str]) -> str:
    def value(match: re.Match) -> str:
        name = match["name"]
        if name == "name":  # the object the route is about
            if route.startswith(("packs/", "api/templatepacks/")):
                return values["pack"]
            return values["node" if "datanodes" in route else "executor"]
        return values[name]

    return "/" + re.sub(r"<(?:\w+:)?(?P<name>\w+)>", value, route)


def _outcome(response, url: str) -> str:
    status = response.status_code
    if status in (401,) or (status == 302 and "/login/" in response.get("Location", "")):
        return LOGIN
    if status == 403:
        return LOGIN if response.wsgi_request.user.is_anonymous else DENIED
    if status == 404:
        return HIDDEN
    assert status < 500, f"{url}: {status}"
    return OK


def ask(world: World, person: str, url: str) -> str:
    client = Client()
    if person != "anonymous":
        client.force_login(world.people[person])
    with transaction.atomic():  # what one person does never changes what the next one sees
        response = client.get(url, HTTP_ACCEPT="text/html,application/json")
        if response.status_code == 405:  # a POST-only route: the refusal comes before the input check
            response = client.post(url, {})
        transaction.set_rollback(True)
    return _outcome(response, url)


@pytest.mark.parametrize("route", sorted(url_map()))
def test_each_person_gets_what_the_route_declares(world: World, route: str):
    if (entry := _regex_entry(route)) is not None:
        url, kind = entry
    else:
        url, kind = _url(route, world.values), ROUTES[route]
    got = {person: ask(world, person, url) for person in PEOPLE}
    expected = {person: getattr(kind, person) for person in PEOPLE}
    assert got == expected, f"{url}: {got}"


@pytest.mark.parametrize("page", ["upload/", "new-template/", "edit/{path}", "delete/"])
def test_a_reader_opening_a_pack_change_form_is_refused_as_the_api_refuses_the_change(
    world: World, page: str
):
    """Rita reads sales-pack; its change forms answer her 403 with the API's words
    and show no form, instead of a form whose save would be refused."""
    client = Client()
    client.force_login(world.people["reader"])
    response = client.get(f"/packs/sales-pack/{page.format(path=world.values['path'])}")
    assert response.status_code == 403
    assert b"Only owners of sales-pack may change it." in response.content
    assert b'name="archive"' not in response.content and b'name="text"' not in response.content


def test_a_reader_posting_the_pack_acl_is_refused_and_the_acl_is_kept(world: World):
    client = Client()
    client.force_login(world.people["reader"])
    response = client.post("/packs/sales-pack/acl/", {"owners": "rita", "readers": ""})
    assert response.status_code == 403
    pack = TemplatePack.objects.get(name="sales-pack")
    assert not access.can(world.people["reader"], access.CHANGE, pack)


def test_an_outsider_asking_for_a_pack_change_form_learns_nothing_of_the_pack(world: World):
    client = Client()
    client.force_login(world.people["outsider"])
    assert client.get("/packs/sales-pack/upload/").status_code == 404
    assert client.get(f"/packs/sales-pack/edit/{world.values['path']}").status_code == 404
