"""Weights through the real gate: alice's quota weighs 2, bob has none (1); both
keep a backlog on an executor with room for three jobs. As jobs end, the freed
slots go two to alice for one to bob (with equal weights they would go two to
bob, whose jobs waited longer)."""

from __future__ import annotations

import pytest

from portal.orchestration.models import JobExecution, JobStatus
from portal.quotas.models import Quota
from portal.topology.models import SpecExecutor
from tests.builders.quotas import finish, one_hop_flow, run, the_job
from tests.factories import UserFactory
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


def test_freed_slots_go_two_to_one_between_owners_weighted_two_to_one():
    nodes("a", "b")
    executor("x1", "a>b")
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    Quota.objects.create(scope=Quota.Scope.USER, user=alice, weight=2)
    Quota.objects.create(
        scope=Quota.Scope.EXECUTOR, executor=SpecExecutor.objects.get(name="x1"), max_concurrent_jobs=3
    )
    flows = {alice: one_hop_flow(alice, "a"), bob: one_hop_flow(bob, "b")}
    # Bob's backlog first: his jobs are the older waiters, so ties would go his way.
    jobs = [the_job(run(flows[who], who)) for who, n in ((bob, 8), (alice, 10)) for _ in range(n)]
    owner = {job.pk: job.execution.flow.owner.username for job in jobs}
    in_flight = list(JobExecution.objects.filter(status=JobStatus.ORCHESTRATED).order_by("dispatched_at"))
    assert [owner[job.pk] for job in in_flight] == ["bob"] * 3
    dispatched: list[str] = []
    for _ in range(12):  # the oldest job in flight ends; the gate hands its slot on
        finish(in_flight.pop(0))
        new = JobExecution.objects.filter(status=JobStatus.ORCHESTRATED).exclude(
            pk__in=[job.pk for job in in_flight]
        )
        assert new.count() == 1
        in_flight.append(new.get())
        dispatched.append(owner[in_flight[-1].pk])
    assert dispatched == ["alice", "alice", "bob"] * 4  # a round: alice's two slots, bob's one
    held = JobExecution.objects.filter(status=JobStatus.PENDING).first()
    assert held is not None and held.message.startswith("waiting: executor x1 at 3 of 3 concurrent jobs")
