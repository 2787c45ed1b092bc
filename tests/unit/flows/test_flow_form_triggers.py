"""Olivia creates a flow whose run waits for another flow's datasets, on the flow form itself:
a bad upstream or freshness goal is said beside its field and nothing is saved (neither the flow
nor its triggers); put right, the flow and its triggers are saved together. An edit that does not
show the trigger fields (an older client) leaves the triggers alone."""

from __future__ import annotations

import pytest

from portal.flows.models import FlowConfig
from portal.flows.triggers import services as trigger_services
from tests.builders.flows import new_flow
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db


def with_triggers(**fields: str) -> dict:
    form = new_flow(flow_name="report", run_immediately=None)
    form.update({"trigger-shown": "1", "trigger-upstream_mode": "any", "trigger-debounce_seconds": "0"})
    form.update({f"trigger-{key}": value for key, value in fields.items()})
    return form


def test_the_flow_form_saves_triggers_with_the_flow_or_neither(browser, owner, topology_nodes, sales_pack):
    FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders-up")
    page = browser.get("/flows/new/").content.decode()
    assert 'name="trigger-upstream"' in page and 'name="trigger-freshness"' in page

    refused = browser.post("/flows/new/", with_triggers(upstream="sales/nope", freshness="by 6pm"))
    assert refused.status_code == 400
    text = refused.content.decode()
    assert "sales/nope: no such flow." in text and "Not a freshness goal: &#x27;by 6pm&#x27;" in text
    assert not FlowConfig.objects.filter(flow_name="report").exists()

    saved = browser.post(
        "/flows/new/", with_triggers(upstream="sales/orders-up", upstream_mode="all", freshness="within 2h")
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]
    report = FlowConfig.objects.get(flow_name="report")
    found = trigger_services.settings_of(report)
    assert (found.upstream, found.upstream_mode, found.freshness) == (["sales/orders-up"], "all", "within 2h")
    edit = browser.get("/flows/sales/report/edit/").content.decode()
    assert "sales/orders-up</textarea>" in edit

    # An edit posted without the trigger fields keeps them.
    plain = {k: v for k, v in with_triggers().items() if not k.startswith("trigger-")}
    assert browser.post("/flows/sales/report/edit/", {**plain, "description": "changed"}).status_code == 302
    assert trigger_services.settings_of(report).upstream == ["sales/orders-up"]
