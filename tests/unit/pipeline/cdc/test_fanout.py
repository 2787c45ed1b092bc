"""A cdc flow's destinations share one slot: it is released only up to the lowest position over
every destination's tables, never while one has none, and their jobs take the slot in turn."""

from __future__ import annotations

import psycopg

from portal.pipeline.cdc import fanout as cdc_fanout
from portal.pipeline.cdc.pgoutput import parse_lsn
from portal.pipeline.jobspec import JobSpec

ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"


def spec(others: dict[str, dict[str, str]] | None = None) -> JobSpec:
    data = {"job_name": "shop.f.1-db-to-lake", "properties": {}}
    if others is not None:
        data[cdc_fanout.OTHERS_KEY] = others
    return JobSpec.from_dict(data)


def test_alone_the_slot_is_released_to_the_lowest_table_position():
    own = {"a.t": "0/3000", "a.u": "0/2000"}
    assert cdc_fanout.release_point(spec(), own, ["a.t", "a.u"]) == parse_lsn("0/2000")
    assert cdc_fanout.release_point(spec(), {"a.t": "0/3000"}, ["a.t", "a.u"]) is None


def test_a_destination_behind_holds_the_release_back():
    behind = spec({"shop.f.1-db-to-warehouse": {"a.t": "0/1000"}})
    assert cdc_fanout.release_point(behind, {"a.t": "0/9000"}, ["a.t"]) == parse_lsn("0/1000")
    assert cdc_fanout.others_hold_positions(behind)


def test_a_destination_without_a_position_releases_nothing():
    fresh = spec({"shop.f.1-db-to-warehouse": {"a.t": ""}})
    assert cdc_fanout.release_point(fresh, {"a.t": "0/9000"}, ["a.t"]) is None
    assert not cdc_fanout.others_hold_positions(fresh)


def test_the_positions_travel_in_the_jobspec():
    sent = spec({"j": {"a.t": "0/10"}})
    assert cdc_fanout.others(JobSpec.from_dict(sent.to_dict())) == {"j": {"a.t": "0/10"}}


def test_one_job_at_a_time_holds_the_slot():
    slot = "fp_cdc_1_abcdef012345"
    with (
        psycopg.connect(ADMIN_URL, autocommit=True) as first,
        psycopg.connect(ADMIN_URL, autocommit=True) as second,
    ):
        cdc_fanout.hold(first, slot)
        key = cdc_fanout.lock_key(slot)
        assert second.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() == (False,)
        other = cdc_fanout.lock_key("fp_cdc_2_abcdef012345")
        assert second.execute("SELECT pg_try_advisory_lock(%s)", (other,)).fetchone() == (True,)
    with psycopg.connect(ADMIN_URL, autocommit=True) as third:  # released with the connection
        assert third.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() == (True,)
