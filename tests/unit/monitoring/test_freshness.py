"""Stories of a freshness goal: the datasets a flow publishes must be committed within a span or
daily by a time; when they are not, `sla.dataset_stale` is raised once, its flow's "SLA miss"
subscribers hear of it like of a flow's SLA miss, the dashboard lists the stale dataset, and the
next commit makes it fresh again."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from django.utils import timezone

from portal.events import sinks
from portal.events.models import Event
from portal.flows.triggers import services as trigger_services
from portal.flows.triggers.goals import first_due, next_due, parse_goal
from portal.flows.triggers.models import FreshnessGoal
from portal.monitoring.freshness import STALE, check_freshness
from portal.monitoring.models import Subscription
from portal.orchestration.control import triggers
from portal.orchestration.state import statestore
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.orchestration.factories import FlowExecutionFactory

pytestmark = pytest.mark.django_db


def test_a_goal_is_written_as_a_span_or_a_time_of_day():
    assert parse_goal("within 2h") == (7200, None)
    assert parse_goal("30m") == (1800, None)
    assert parse_goal("by 06:00") == (None, time(6, 0))
    for bad in ("soon", "within 0m", "by 25:00", "within 40d"):
        with pytest.raises(ValueError):
            parse_goal(bad)


def test_a_daily_goal_is_due_at_the_deadline_after_the_one_a_commit_meets(settings):
    settings.TIME_ZONE = "UTC"
    by_six = time(6, 0)
    early = datetime(2026, 11, 27, 5, 0, tzinfo=UTC)  # meets today's 06:00
    late = datetime(2026, 11, 27, 7, 0, tzinfo=UTC)  # meets tomorrow's 06:00
    assert next_due(None, by_six, early) == datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
    assert next_due(None, by_six, late) == datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
    assert first_due(None, by_six, late) == datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
    assert next_due(7200, None, early) == early + timedelta(hours=2)


def test_a_stale_dataset_raises_its_event_once_reaches_subscribers_and_the_dashboard(client, settings):
    owner = UserFactory(username="olivia")
    rita = UserFactory(username="rita")
    orders = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders")
    trigger_services.save_settings(orders, {"freshness": "within 2h"})
    Subscription.objects.create(user=rita, flow=orders, on_sla_miss=True, on_failure=False, by_email=True)
    goal = FreshnessGoal.objects.get(flow=orders)
    assert goal.due_at > timezone.now() + timedelta(minutes=119)

    assert check_freshness(timezone.now()) == 0  # not due yet
    later = timezone.now() + timedelta(hours=3)
    assert check_freshness(later) == 1
    assert check_freshness(later + timedelta(minutes=5)) == 0  # once

    event = Event.objects.get(kind=STALE)
    assert (event.flow_group, event.flow_name, event.severity) == ("sales", "orders", "ERROR")
    assert "committed within 2h" in event.message and "never committed" in event.message
    assert sinks.deliver_pending_events() == 1
    assert [message.to for message in mail.outbox] == [["rita@example.org"]]
    assert "sla.dataset_stale: sales/orders" in mail.outbox[0].subject

    client.force_login(rita)
    page = client.get("/monitoring/").content.decode()
    assert 'data-test="stale-datasets"' in page and "goal: committed within 2h" in page
    assert "stale for <time" in page and "0 minutes" not in page  # to the second, never "0 minutes"
    assert "stale" in client.get("/flows/sales/orders/").content.decode()


def test_a_commit_makes_the_dataset_fresh_again_and_moves_the_due_time():
    owner = UserFactory(username="olivia")
    orders = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders")
    trigger_services.save_settings(orders, {"freshness": "within 2h"})
    check_freshness(timezone.now() + timedelta(hours=3))
    assert FreshnessGoal.objects.get(flow=orders).stale_since is not None

    triggers.execution_committed(FlowExecutionFactory(flow=orders))

    goal = FreshnessGoal.objects.get(flow=orders)
    assert goal.stale_since is None and goal.last_commit_at is not None
    assert goal.due_at == goal.last_commit_at + timedelta(hours=2)


def test_a_pass_reads_only_due_goals(django_assert_max_num_queries):
    owner = UserFactory(username="olivia")
    for n in range(30):
        flow = FlowConfigFactory(owner=owner, flow_group="sales", flow_name=f"f{n}")
        trigger_services.save_settings(flow, {"freshness": "within 1h" if n < 3 else "within 1d"})
    with django_assert_max_num_queries(3 + 3 * 5):  # the due three: each its event and its mark
        assert check_freshness(timezone.now() + timedelta(hours=2)) == 3


def test_a_goal_of_one_dataset_waits_for_that_dataset_s_commit():
    owner = UserFactory(username="olivia")
    orders = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders")
    trigger_services.save_settings(orders, {"dataset_freshness": {"public.orders": "within 1h"}})
    assert trigger_services.settings_of(orders).dataset_freshness == {"public.orders": "within 1h"}

    def committed(urn: str):
        execution = FlowExecutionFactory(flow=orders)
        statestore.check_in(
            flow_id=orders.pk,
            flow_group="sales",
            flow_name="orders",
            job_name="hop1",
            dataset_urn=urn,
            watermark="1",
            execution_id=execution.execution_id,
            status="COMMITTED",
        )
        triggers.execution_committed(execution)

    committed("public.customers")
    assert FreshnessGoal.objects.get(flow=orders).last_commit_at is None
    assert check_freshness(timezone.now() + timedelta(hours=2)) == 1
    event = Event.objects.get(kind=STALE)
    assert event.message.startswith("Dataset public.orders of sales/orders is stale")
    assert event.subject == "sales/orders/public.orders"

    committed("public.orders")
    goal = FreshnessGoal.objects.get(flow=orders)
    assert goal.stale_since is None and goal.last_commit_at is not None


def test_per_dataset_goals_are_refused_line_by_line():
    owner = UserFactory(username="olivia")
    orders = FlowConfigFactory(owner=owner, flow_group="sales", flow_name="orders")
    with pytest.raises(ValidationError) as refused:
        trigger_services.save_settings(
            orders, {"dataset_freshness": "public.orders: by 06:00\npublic.customers soon\nx: whenever"}
        )
    assert refused.value.message_dict["dataset_freshness"] == [
        "'public.customers soon': write <dataset.urn>: <goal>, e.g. public.orders: by 06:00.",
        "'x: whenever': write <dataset.urn>: <goal>, e.g. public.orders: by 06:00.",
    ]
    trigger_services.save_settings(
        orders, {"dataset_freshness": "public.orders: by 06:00\ndb:t.x: within 2h"}
    )
    assert trigger_services.settings_of(orders).dataset_freshness == {
        "db:t.x": "within 2h",
        "public.orders": "by 06:00",
    }
