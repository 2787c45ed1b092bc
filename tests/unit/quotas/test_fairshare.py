"""The fair order on its own: who goes next when slots free up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from portal.quotas.fairshare import CATCH_UP, ON_DEMAND, SCHEDULED, fair_order, waiter

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def keys(order) -> list[str]:
    return [w.key for w in order]


def test_the_least_served_owner_goes_first_even_when_it_came_last():
    backlog = [waiter(f"a{n}", "a", trigger_class=CATCH_UP, priority=0, since=at(n)) for n in range(5)]
    scheduled = waiter("b0", "b", trigger_class=SCHEDULED, priority=0, since=at(60))
    order = fair_order([*backlog, scheduled], {"a": 4, "b": 0}, limit=2)
    assert keys(order) == ["b0", "a0"]


def test_owners_take_turns_as_each_pick_counts_against_its_owner():
    waiters = [
        waiter(f"{o}{n}", o, trigger_class=ON_DEMAND, priority=0, since=at(n)) for o in "ab" for n in range(3)
    ]
    assert keys(fair_order(waiters, {})) == ["a0", "b0", "a1", "b1", "a2", "b2"]


def test_within_one_owner_scheduled_runs_go_before_backfills_then_priority_then_age():
    waiters = [
        waiter("backfill", "a", trigger_class=CATCH_UP, priority=9, since=at(0)),
        waiter("run-now", "a", trigger_class=ON_DEMAND, priority=0, since=at(1)),
        waiter("tick-low", "a", trigger_class=SCHEDULED, priority=-1, since=at(2)),
        waiter("tick-late", "a", trigger_class=SCHEDULED, priority=5, since=at(4)),
        waiter("tick-early", "a", trigger_class=SCHEDULED, priority=5, since=at(3)),
    ]
    assert keys(fair_order(waiters, {})) == ["tick-early", "tick-late", "tick-low", "run-now", "backfill"]


def test_no_slot_no_pick():
    assert (
        fair_order([waiter("a0", "a", trigger_class=SCHEDULED, priority=0, since=at(0))], {}, limit=0) == []
    )


def test_with_weights_two_to_one_and_both_backlogged_the_picks_go_two_to_one():
    waiters = [
        waiter(f"{o}{n}", o, trigger_class=CATCH_UP, priority=0, since=at(n)) for o in "ab" for n in range(12)
    ]
    order = [w.owner for w in fair_order(waiters, {}, weights={"a": 2, "b": 1})]
    assert order[:9].count("a") == 6 and order[:9].count("b") == 3
    assert all(order[n : n + 3].count("a") == 2 for n in range(0, 18, 3))  # 2:1 in every round


def test_weights_count_the_jobs_already_in_flight():
    # a (weight 3) holds 3 slots, b (weight 1) holds 1: both are at one per unit of weight,
    # so the next slot goes by the waiters' own order (b's scheduled run before a's backfill).
    waiters = [
        waiter("a-backfill", "a", trigger_class=CATCH_UP, priority=0, since=at(0)),
        waiter("b-tick", "b", trigger_class=SCHEDULED, priority=0, since=at(5)),
    ]
    assert keys(fair_order(waiters, {"a": 3, "b": 1}, limit=1, weights={"a": 3})) == ["b-tick"]
    assert keys(fair_order(waiters, {"a": 2, "b": 1}, limit=1, weights={"a": 3})) == ["a-backfill"]
