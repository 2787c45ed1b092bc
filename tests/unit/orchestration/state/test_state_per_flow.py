"""State belongs to the flow that made it: a flow deleted and
re-created under the same group/name, by anyone, starts fresh; staff still
read the old history; the owner of both may adopt it explicitly."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from portal.flows import services as flow_services
from portal.orchestration.models import DatasetState
from portal.orchestration.state import recovery, statestore
from portal.orchestration.state.commitstore import CommitStepStore, store_name_for
from tests.builders.api import api_client_for
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


def spec_of(flow, execution_id: int) -> dict:
    return {
        "flow_id": flow.pk,
        "flow_group": flow.flow_group,
        "flow_name": flow.flow_name,
        "job_name": JOB,
        "execution_id": execution_id,
        "properties": {},
    }


def crash_after_writing_steps(flow, watermark: str, execution_id: int) -> None:
    """A run of `flow` wrote its commit steps and died before running them."""
    step = {
        "type": "high_watermark",
        "flow_id": flow.pk,
        "flow_group": flow.flow_group,
        "flow_name": flow.flow_name,
        "job_name": JOB,
        "dataset_urn": "orders",
        "value": watermark,
        "execution_id": execution_id,
    }
    CommitStepStore().put_all(store_name_for(spec_of(flow, execution_id)), "orders", [step])


def test_a_deleted_flows_unfinished_commit_steps_never_run_for_a_re_created_one(owner, outsider):
    """Recovery of the new flow's first run would otherwise finish (publish)
    the deleted flow's last commit, and its dataset could never commit again."""
    first = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    crash_after_writing_steps(first, "100", 1)
    first_id = first.pk
    flow_services.delete_flow(first)

    second = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=outsider)
    report = recovery.recover(spec_of(second, 2))

    assert report.datasets == {}
    assert previous(second) == {}
    assert not DatasetState.objects.exists()  # olivia's watermark was not checked in by oscar's run
    assert CommitStepStore().exists(f"sales/orders/{JOB}#{first_id}", "orders")  # kept for staff
    # The new flow commits the same dataset on its own.
    crash_after_writing_steps(second, "7", 2)
    assert recovery.recover(spec_of(second, 3)).recovered.keys() == {"orders"}
    assert previous(second) == {"orders": "7"}


def test_adopted_state_brings_its_unfinished_commit_steps(owner):
    first = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    run_checks_in(first, "100", 1)
    crash_after_writing_steps(first, "150", 2)
    flow_services.delete_flow(first)
    again = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)

    assert adopt(owner, again).status_code == 200
    assert recovery.recover(spec_of(again, 3)).recovered.keys() == {"orders"}
    assert previous(again) == {"orders": "150"}


def test_a_member_of_the_owning_group_may_not_adopt_state_another_user_made(owner, outsider):
    """Mia may change the re-created flow (her group owns it) but the old watermarks
    say how far olivia's data was read: accounts.access refuses them to her."""
    team = Group.objects.create(name="team")
    outsider.groups.add(team)
    first = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    run_checks_in(first, "100", 1)
    flow_services.delete_flow(first)
    again = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner, owning_group=team)

    refused = adopt(outsider, again)
    assert refused.status_code == 409
    assert "made by a flow you did not own" in str(refused.json())
    assert previous(again) == {}


def test_the_service_itself_refuses_a_user_who_may_not_change_the_flow(owner, outsider):
    first = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    run_checks_in(first, "100", 1)
    flow_services.delete_flow(first)
    again = FlowConfigFactory(flow_group="sales", flow_name="orders", owner=owner)
    with pytest.raises(statestore.AdoptionRefused, match="owner, its owning group or staff"):
        statestore.adopt_state(again, user=outsider)
    assert previous(again) == {}
