"""State belongs to the flow that made it (issue #24): a flow deleted and
re-created under the same group/name, by anyone, starts fresh; staff still
read the old history; the owner of both may adopt it explicitly."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.flows import services as flow_services
from portal.orchestration import statestore
from portal.orchestration.models import DatasetState
from tests.conftest import api_client_for
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db

JOB = "sales.orders.1-landing-to-lake"


def run_checks_in(flow, watermark: str, execution_id: int) -> None:
    """What the high_watermark commit step of one of the flow's runs does."""
    statestore.HighWatermarkCommitStep.build(
        {
            "flow_id": flow.pk,
            "flow_group": flow.flow_group,
            "flow_name": flow.flow_name,
            "job_name": JOB,
            "dataset_urn": "orders",
            "value": watermark,
            "execution_id": execution_id,
        },
        None,
    ).execute()


def previous(flow) -> dict[str, str]:
    return statestore.previous_state(flow.flow_group, flow.flow_name, JOB, flow.pk)[0]


def adopt(user, flow):
    url = reverse("flowconfig-adopt-state", args=[flow.flow_group, flow.flow_name])
    return api_client_for(user).post(url)


def test_a_flow_re_created_by_another_user_starts_fresh(owner, outsider, staff, client):
    first = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    run_checks_in(first, "100", 1)
    assert previous(first) == {"orders": "100"}
    first_id = first.pk
    flow_services.delete_flow(first)

    second = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=outsider)
    assert previous(second) == {}  # not olivia's watermark
    run_checks_in(second, "7", 2)
    assert previous(second) == {"orders": "7"}
    # Both rows are kept; the old one still names olivia's flow and keeps its history.
    old, new = DatasetState.objects.order_by("pk")
    assert (old.flow_id, old.owner_id, old.watermark) == (first_id, owner.pk, "100")
    assert (new.flow_id, new.owner_id, new.watermark) == (second.pk, outsider.pk, "7")
    assert [h.watermark for h in old.history.all()] == ["100"]
    # The flow's pages show only its own state; staff see both in the state store.
    assert list(statestore.states_of("sales", "orders")) == [new]
    client.force_login(staff)
    listing = client.get(reverse("state:list")).content.decode()
    assert listing.count(JOB) == 2
    assert client.get(reverse("state:dataset", args=[old.pk])).status_code == 200
    # And oscar cannot take olivia's state.
    refused = adopt(outsider, second)
    assert refused.status_code == 409
    assert "made by a flow you did not own" in str(refused.json())
    assert previous(second) == {"orders": "7"}


def test_the_owner_who_re_creates_their_flow_may_adopt_its_state(owner, outsider):
    first = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    run_checks_in(first, "100", 1)
    first_id = first.pk
    flow_services.delete_flow(first)
    again = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    assert previous(again) == {}

    assert adopt(outsider, again).status_code in (403, 404)  # not oscar's flow to act on
    response = adopt(owner, again)
    assert response.status_code == 200, response.content
    assert response.json() == {"adopted": 1}
    assert previous(again) == {"orders": "100"}
    state = DatasetState.objects.get()
    entry = state.history.first()
    assert (entry.status, entry.changed_by) == ("ADOPTED", "olivia")
    assert entry.reason == f"Adopted by flow #{again.pk} from deleted flow #{first_id}."
    # Nothing is left to adopt.
    again_refused = adopt(owner, again)
    assert again_refused.status_code == 409
    assert "no state of a deleted flow to adopt" in str(again_refused.json())


def test_adoption_is_refused_when_the_flow_has_state_of_its_own(owner):
    first = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    run_checks_in(first, "100", 1)
    flow_services.delete_flow(first)
    again = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    run_checks_in(again, "3", 2)
    response = adopt(owner, again)
    assert response.status_code == 409
    assert "already has state of its own for orders" in str(response.json())
    assert previous(again) == {"orders": "3"}
