"""Quotas at dispatch, driven through the real action handlers: a job whose
owner, group or executor is at its concurrent-jobs limit waits, saying why, and
a freed slot goes to the waiter fair order picks (not the oldest)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from portal.orchestration import services
from portal.orchestration.control.actions import process_actions
from portal.orchestration.models import ExecutionStatus, FlowExecution, JobExecution, JobStatus
from portal.quotas.models import Quota
from portal.quotas.services import QuotaExceeded
from portal.topology.models import SpecExecutor
from tests.builders.quotas import CONCURRENT, finish, one_hop_flow, run, the_job
from tests.factories import UserFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def x1(db):
    nodes("a", "b")
    return executor("x1", "a>b")


def test_without_quotas_every_ready_job_is_dispatched_at_once(x1):
    alice = UserFactory(username="alice")
    flow = one_hop_flow(alice, "f")
    jobs = [the_job(run(flow, alice)) for _ in range(5)]
    assert {JobExecution.objects.get(pk=j.pk).status for j in jobs} == {JobStatus.ORCHESTRATED}


def test_a_user_at_her_concurrent_jobs_limit_waits_and_is_told_why(x1):
    alice = UserFactory(username="alice")
    Quota.objects.create(scope=Quota.Scope.USER, user=alice, max_concurrent_jobs=2)
    flow = one_hop_flow(alice, "f")
    first, _second, third = (the_job(run(flow, alice)) for _ in range(3))
    third.refresh_from_db()
    assert third.status == JobStatus.PENDING
    assert third.message == "waiting: alice at 2 of 2 concurrent jobs"
    assert third.waiting_since is not None

    finish(first)  # a slot frees: the waiter goes at once, not at the next recheck
    third.refresh_from_db()
    assert third.status == JobStatus.ORCHESTRATED
    assert third.waiting_since is None and third.message == ""


def test_the_default_quota_holds_every_user_without_one_of_their_own(x1):
    Quota.objects.create(scope=Quota.Scope.DEFAULT, max_concurrent_jobs=1)
    bob, carol = UserFactory(username="bob"), UserFactory(username="carol")
    Quota.objects.create(scope=Quota.Scope.USER, user=carol, max_concurrent_jobs=3)
    bobs, carols = one_hop_flow(bob, "bobs"), one_hop_flow(carol, "carols")
    bob_jobs = [the_job(run(bobs, bob)) for _ in range(2)]
    carol_jobs = [the_job(run(carols, carol)) for _ in range(3)]
    assert [JobExecution.objects.get(pk=j.pk).status for j in bob_jobs] == [
        JobStatus.ORCHESTRATED,
        JobStatus.PENDING,
    ]
    assert JobExecution.objects.get(pk=bob_jobs[1].pk).message == "waiting: bob at 1 of 1 concurrent jobs"
    assert {JobExecution.objects.get(pk=j.pk).status for j in carol_jobs} == {JobStatus.ORCHESTRATED}


def test_a_group_quota_counts_the_jobs_of_every_flow_the_group_owns(x1):
    team = Group.objects.create(name="team-a")
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    team.user_set.add(alice, bob)
    Quota.objects.create(scope=Quota.Scope.GROUP, group=team, max_concurrent_jobs=2)
    flows = [one_hop_flow(user, f"f-{user.username}", owning_group=team) for user in (alice, bob)]
    jobs = [the_job(run(flows[0], alice)), the_job(run(flows[1], bob)), the_job(run(flows[1], bob))]
    waiting = JobExecution.objects.get(pk=jobs[2].pk)
    assert waiting.status == JobStatus.PENDING
    assert waiting.message == "waiting: group team-a at 2 of 2 concurrent jobs"


def test_an_executor_full_of_one_tenants_backfill_serves_another_tenants_scheduled_run_next(x1):
    Quota.objects.create(scope=Quota.Scope.EXECUTOR, executor=x1, max_concurrent_jobs=2)
    a, b = UserFactory(username="team-a"), UserFactory(username="team-b")
    backfill, hourly = one_hop_flow(a, "backfill"), one_hop_flow(b, "hourly")
    a_jobs = [the_job(run(backfill, a)) for _ in range(5)]
    assert [JobExecution.objects.get(pk=j.pk).status for j in a_jobs].count(JobStatus.ORCHESTRATED) == 2
    assert (
        JobExecution.objects.get(pk=a_jobs[2].pk).message == "waiting: executor x1 at 2 of 2 concurrent jobs"
    )

    b_job = the_job(run(hourly, b, FlowExecution.Trigger.SCHEDULE))  # due later than the whole backlog
    assert JobExecution.objects.get(pk=b_job.pk).status == JobStatus.PENDING

    finish(a_jobs[0])  # the freed slot goes to team-b (no job in flight), not to team-a's older waiters
    assert JobExecution.objects.get(pk=b_job.pk).status == JobStatus.ORCHESTRATED
    assert JobExecution.objects.get(pk=a_jobs[2].pk).status == JobStatus.PENDING

    finish(a_jobs[1])  # team-a's next waiter in order of waiting
    assert JobExecution.objects.get(pk=a_jobs[2].pk).status == JobStatus.ORCHESTRATED
    assert JobExecution.objects.filter(status__in=["ORCHESTRATED", "RUNNING"], executor="x1").count() == 2


def test_a_cancelled_waiter_stops_waiting(x1):
    alice = UserFactory(username="alice")
    Quota.objects.create(scope=Quota.Scope.USER, user=alice, max_concurrent_jobs=1)
    flow = one_hop_flow(alice, "f")
    run(flow, alice)
    second = run(flow, alice)
    services.kill(second, user=alice)
    process_actions()
    job = the_job(second)
    assert job.status == JobStatus.CANCELLED and job.waiting_since is None


def test_run_now_past_the_executions_per_hour_quota_is_refused_naming_it(x1):
    alice = UserFactory(username="alice")
    Quota.objects.create(scope=Quota.Scope.USER, user=alice, max_executions_per_hour=2)
    flow = one_hop_flow(alice, "f")
    run(flow, alice), run(flow, alice)
    with pytest.raises(QuotaExceeded) as refused:
        services.run_now(flow, user=alice)
    assert refused.value.message == "Quota exceeded: alice at 2 of 2 executions started per hour."
    assert FlowExecution.objects.filter(flow=flow).count() == 2


def test_a_scheduled_tick_past_the_hourly_quota_is_skipped_saying_so(x1):
    alice = UserFactory(username="alice")
    Quota.objects.create(scope=Quota.Scope.DEFAULT, max_executions_per_hour=1)
    flow = one_hop_flow(alice, "f")
    run(flow, alice)
    tick = run(flow, alice, FlowExecution.Trigger.SCHEDULE)
    tick.refresh_from_db()
    assert tick.status == ExecutionStatus.SKIPPED
    assert tick.message == "Not run: Quota exceeded: alice at 1 of 1 executions started per hour."


def test_an_executor_quota_names_the_executor_the_job_runs_on(x1):
    Quota.objects.create(
        scope=Quota.Scope.EXECUTOR, executor=SpecExecutor.objects.get(name="x1"), max_concurrent_jobs=0
    )
    alice = UserFactory(username="alice")
    job = the_job(run(one_hop_flow(alice, "f"), alice))
    assert job.message == "waiting: executor x1 at 0 of 0 concurrent jobs"


def test_among_one_owners_waiters_the_higher_priority_flow_goes_first(x1):
    alice = UserFactory(username="alice")
    Quota.objects.create(scope=Quota.Scope.USER, user=alice, max_concurrent_jobs=1)
    low = one_hop_flow(alice, "low", properties={**CONCURRENT, "flow.priority": "-5"})
    high = one_hop_flow(alice, "high", properties={**CONCURRENT, "flow.priority": "3"})
    running = the_job(run(low, alice))
    low_waiter, high_waiter = the_job(run(low, alice)), the_job(run(high, alice))
    finish(running)
    assert JobExecution.objects.get(pk=high_waiter.pk).status == JobStatus.ORCHESTRATED
    assert JobExecution.objects.get(pk=low_waiter.pk).status == JobStatus.PENDING
