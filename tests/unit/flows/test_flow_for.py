"""Every page and endpoint addressed by a flow's key asks one question: the flow at (group, name)
this user may see or change — a 404 for what they cannot see, a 403 saying who may change it."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404

from portal.accounts import access
from portal.flows.rules import CHANGE_DENIED, flow_for
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db


def test_anyone_sees_a_flow_only_its_owner_or_staff_change_it(owner, outsider, staff):
    flow = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    assert flow_for(outsider, "sales", "orders") == flow
    assert flow_for(owner, "sales", "orders", access.CHANGE) == flow
    assert flow_for(staff, "sales", "orders", access.CHANGE) == flow
    with pytest.raises(PermissionDenied, match=CHANGE_DENIED):
        flow_for(outsider, "sales", "orders", access.CHANGE)
    with pytest.raises(Http404):
        flow_for(owner, "sales", "nothing")


def test_the_same_answer_from_a_page_and_the_api(client, api, outsider, owner):
    FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    client.force_login(outsider)
    assert client.get("/flows/sales/orders/versions/").status_code == 200
    assert client.get("/flows/sales/orders/triggers/").status_code == 403
    assert client.get("/flows/sales/nothing/versions/").status_code == 404
    assert api.get("/api/flowconfigs/sales/nothing/versions").status_code == 404
