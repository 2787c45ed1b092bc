"""Every page and endpoint addressed by a flow's key asks one question: the flow at (group, name)
this user may see or change — a 404 for what they cannot see, a 403 saying who may change it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser, Group
from django.core.exceptions import PermissionDenied
from django.http import Http404

from portal.accounts import access
from portal.flows.models import FlowConfig
from portal.flows.rules import CHANGE_DENIED, flow_for
from tests.factories import FlowConfigFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(owner):
    return FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)


def test_anyone_signed_in_sees_a_flow(orders, outsider):
    assert flow_for(outsider, "sales", "orders") == orders
    assert flow_for(outsider, "sales", "orders", access.VIEW) == orders


def test_its_owner_its_owning_group_and_staff_change_and_delete_it(orders, owner, staff):
    team = Group.objects.create(name="sales-team")
    member = UserFactory()
    member.groups.add(team)
    FlowConfig.objects.filter(pk=orders.pk).update(owning_group=team)
    for user in (owner, member, staff):
        assert flow_for(user, "sales", "orders", access.CHANGE) == orders
        assert flow_for(user, "sales", "orders", access.DELETE) == orders


def test_an_outsider_who_sees_it_is_told_who_may_change_it(orders, outsider):
    for action in (access.CHANGE, access.DELETE):
        with pytest.raises(PermissionDenied, match=CHANGE_DENIED):
            flow_for(outsider, "sales", "orders", action)


def test_a_key_that_names_no_flow_is_a_404_even_for_staff(orders, staff):
    for group, name in (("sales", "nothing"), ("hr", "orders")):
        with pytest.raises(Http404):
            flow_for(staff, group, name, access.CHANGE)


def test_no_one_signed_out_or_deactivated_sees_a_flow(orders, owner):
    with pytest.raises(Http404):
        flow_for(AnonymousUser(), "sales", "orders")
    owner.is_active = False
    owner.save()
    with pytest.raises(Http404):
        flow_for(owner, "sales", "orders", access.CHANGE)


def test_a_caller_narrowing_the_rows_is_answered_from_them(orders, owner):
    paused = FlowConfig.objects.filter(paused=True).select_related("owner")
    with pytest.raises(Http404):
        flow_for(owner, "sales", "orders", queryset=paused)
    orders.paused = True
    orders.save()
    assert flow_for(owner, "sales", "orders", access.CHANGE, queryset=paused) == orders


def test_the_same_answer_from_a_page_and_the_api(client, api, outsider, orders):
    client.force_login(outsider)
    assert client.get("/flows/sales/orders/versions/").status_code == 200
    assert client.get("/flows/sales/orders/triggers/").status_code == 403
    assert client.get("/flows/sales/nothing/versions/").status_code == 404
    assert api.get("/api/flowconfigs/sales/nothing/versions").status_code == 404
