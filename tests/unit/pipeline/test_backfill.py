"""Backfill jobs (``JobSpec.backfill``): an explicit (low, high] range per dataset, on the real JDBC
and files sources; the stored watermark never moves and unlisted datasets do not run."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from portal.pipeline import run_job
from portal.pipeline.destinations.commitplan import plan_commit
from portal.pipeline.errors import ConfigError
from portal.pipeline.jobspec import JobSpec
from tests.builders.pipeline import create_orders, insert_orders, order_rows, orders_props

from .helpers import NOW, publish, read, run_and_publish, spec, write_csv


def _types(plan: dict[str, list[dict[str, Any]]]) -> dict[str, set[str]]:
    return {urn: {s["type"] for s in steps} for urn, steps in plan.items()}


# -- JobSpec validation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backfill", "message"),
    [
        ([1, 2], "jobspec field 'backfill' must be an object"),
        ({"orders": "2024-01-01"}, "jobspec field 'backfill' ['orders'] must be an object"),
        ({"orders": {"low": "1"}}, "jobspec field 'backfill' ['orders']: 'high' is required"),
        ({"orders": {"low": "1", "high": " "}}, "jobspec field 'backfill' ['orders']: 'high' is required"),
        ({"orders": {"high": "5", "upto": "6"}}, "['orders']: unknown key(s) upto"),
        ({"orders": {"low": True, "high": "5"}}, "['orders']: 'low' must be a watermark string, got bool"),
        ({"orders": {"low": "5", "high": "5"}}, "['orders']: 'low' and 'high' are equal"),
        ({"": {"high": "5"}}, "dataset URNs must be non-empty strings"),
    ],
)
def test_jobspec_rejects_a_malformed_backfill_naming_the_field_and_urn(backfill: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        JobSpec.from_dict({"job_name": "j", "backfill": backfill})
    assert message in str(info.value)


def test_jobspec_backfill_round_trips_and_numbers_become_strings() -> None:
    spec_ = JobSpec.from_dict(
        {"job_name": "j", "backfill": {"t": {"low": 10, "high": 20}, "u": {"high": "9"}}}
    )
    assert spec_.is_backfill
    assert spec_.backfill == {"t": {"low": "10", "high": "20"}, "u": {"low": None, "high": "9"}}
    assert JobSpec.from_dict(spec_.to_dict()) == spec_
    assert not JobSpec.from_dict({"job_name": "j"}).is_backfill
    assert JobSpec.from_dict({"job_name": "j"}).to_dict()["backfill"] == {}


def test_a_bad_backfill_comes_back_as_one_failed_planning_task(spark: SparkSession, tmp_path: Path) -> None:
    job = spec(tmp_path, {"source.class": "x.Y"}, backfill={"orders": {"low": "1"}})
    states = run_job(spark, job)
    assert [s["status"] for s in states] == ["FAILED"]
    assert states[0]["task_id"].endswith("_planning")
    assert "jobspec field 'backfill' ['orders']: 'high' is required" in states[0]["error"]


# -- JDBC source ------------------------------------------------------------------------------------


def test_jdbc_backfill_reads_the_explicit_range_and_leaves_the_watermark_alone(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    create_orders(pg, "bf_a", order_rows(1, 20))  # updated_at 00:00:01 .. 00:00:20
    create_orders(pg, "bf_b", order_rows(1, 5))
    # A look-back is configured: a backfill must still read exactly (low, high], no window below low.
    props = orders_props(pg_database, tmp_path, "bf_a,bf_b", **{"extract.lookback": "5s"})
    marks: dict[str, str] = {}
    run_and_publish(spark, spec(tmp_path, props), marks)
    stored = dict(marks)
    assert {k: v.split('"value":"')[-1][:19] for k, v in stored.items()} == {
        "bf_a": "2024-01-01 00:00:20",
        "bf_b": "2024-01-01 00:00:05",
    }

    insert_orders(pg, "bf_a", order_rows(21, 10))  # rows up to 00:00:30 exist now
    backfill_props = {**props, "data.publisher.final.dir": str(tmp_path / "backfill")}
    job = spec(
        tmp_path,
        backfill_props,
        execution_id=2,
        watermarks=marks,
        backfill={"bf_a": {"low": "2024-01-01 00:00:05", "high": "2024-01-01 00:00:12"}},
    )
    states = run_job(spark, job)
    assert [(s["dataset_urn"], s["status"]) for s in states] == [("bf_a", "SUCCEEDED")]  # bf_b not run
    assert states[0]["low_watermark"] == "2024-01-01 00:00:05"  # the stored 00:00:20 is ignored
    assert states[0]["expected_high_watermark"] == "2024-01-01 00:00:12"
    assert states[0]["records_extracted"] == 7
    plan = plan_commit(job, states)
    assert _types(plan) == {"bf_a": {"fs_rename"}}  # published, but NO high_watermark step
    publish(job, states, marks)
    assert marks == stored
    assert sorted(r.id for r in read(spark, tmp_path / "backfill" / "bf_a").collect()) == list(range(6, 13))

    # high beyond the data is clamped to the column max; no low = from the first row; ranges apply.
    job = spec(
        tmp_path,
        {**backfill_props, "source.jdbc.ranges": "2"},
        execution_id=3,
        watermarks=marks,
        backfill={"bf_a": {"low": None, "high": "2030-01-01 00:00:00"}},
    )
    states = run_job(spark, job)
    assert [(s["low_watermark"], s["expected_high_watermark"], s["status"]) for s in states] == [
        (None, "2024-01-01 00:00:15.500000", "SUCCEEDED"),
        ("2024-01-01 00:00:15.500000", "2024-01-01 00:00:30", "SUCCEEDED"),
    ]
    assert [s["records_extracted"] for s in states] == [15, 15]
    # Every load read again: the dataset folder is replaced whole, not added to a second time.
    assert _types(plan_commit(job, states)) == {"bf_a": {"fs_replace"}}

    # The next normal run continues from the stored watermark, as if no backfill had happened.
    states = run_and_publish(spark, spec(tmp_path, props, execution_id=4), marks)
    by = {s["dataset_urn"]: s for s in states}
    assert by["bf_a"]["records_extracted"] == 10 and by["bf_b"]["records_extracted"] == 0
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "bf_a").collect()) == list(range(1, 31))


def test_a_backfill_written_as_the_docs_show_works_on_a_timestamptz_column(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    """Bounds without an offset are UTC: ``2013-03-01 05:00:00`` on a ``timestamptz`` column."""
    pg.execute("DROP TABLE IF EXISTS flights_tz")
    pg.execute("CREATE TABLE flights_tz (id bigint PRIMARY KEY, dep timestamptz)")
    with pg.cursor() as cur:  # one flight an hour, 2013-03-01 00:00 .. 09:00 UTC
        cur.executemany(
            "INSERT INTO flights_tz VALUES (%s, %s)",
            [(h, dt.datetime(2013, 3, 1, h, tzinfo=dt.UTC)) for h in range(10)],
        )
    props = orders_props(pg_database, tmp_path, "flights_tz", **{"extract.delta.fields": "dep"})
    job = spec(
        tmp_path,
        props,
        backfill={"flights_tz": {"low": "2013-03-01 02:00:00", "high": "2013-03-01 05:00:00"}},
    )
    states = run_job(spark, job)
    assert [s["status"] for s in states] == ["SUCCEEDED"], states[0]["error"]
    assert states[0]["records_extracted"] == 3  # 03:00, 04:00, 05:00 UTC
    publish(job, states, {})
    assert sorted(r.id for r in read(spark, tmp_path / "lake" / "flights_tz").collect()) == [3, 4, 5]
    # An offset in the bound is honoured too: 07:00+02:00 is 05:00 UTC.
    job = spec(
        tmp_path,
        props,
        execution_id=2,
        backfill={"flights_tz": {"low": "2013-03-01T04:00:00+02:00", "high": "2013-03-01 07:00:00+02:00"}},
    )
    assert [s["records_extracted"] for s in run_job(spark, job)] == [3]


def test_jdbc_backfill_errors_name_the_urn_and_write_no_watermark(
    spark: SparkSession, pg: psycopg.Connection, pg_database: dict[str, Any], tmp_path: Path
) -> None:
    create_orders(pg, "bf_c", order_rows(1, 5))
    props = orders_props(pg_database, tmp_path, "bf_c")
    cases = {
        "bf_c": ({"low": "2024-01-01 00:00:01", "high": "yesterday"}, "backfill ['bf_c']: high 'yesterday'"),
        "bf_c ": ({"low": "2024-01-01 00:00:04", "high": "2024-01-01 00:00:02"}, "is not below high"),
        "nope": ({"high": "2024-01-01 00:00:02"}, "backfill ['nope']: the source has no dataset 'nope'"),
    }
    for execution, (urn, (bounds, message)) in enumerate(cases.items(), start=1):
        job = spec(tmp_path, props, execution_id=execution, backfill={urn.strip(): bounds})
        states = run_job(spark, job)
        assert [s["status"] for s in states] == ["FAILED"], urn
        assert message in states[0]["error"], states[0]["error"]
        assert plan_commit(job, states) == {urn.strip(): []}

    snapshot = {**props, "extract.is.full": "true"}
    states = run_job(spark, spec(tmp_path, snapshot, execution_id=9, backfill={"bf_c": {"high": "5"}}))
    assert states[0]["status"] == "FAILED" and "only an incremental table" in states[0]["error"]
    assert not (tmp_path / "lake").exists()


# -- files source -----------------------------------------------------------------------------------


def _ms(seconds: int) -> str:
    return f"{seconds * 1000:015d}"


def test_files_backfill_selects_by_time_or_by_watermark_and_leaves_state_alone(
    spark: SparkSession, tmp_path: Path
) -> None:
    t = int(NOW) - 1000
    landing = tmp_path / "landing"
    write_csv(landing / "orders" / "a.csv", "id", ["1"], mtime=t)
    write_csv(landing / "orders" / "b1.csv", "id", ["2"], mtime=t + 100)
    write_csv(landing / "orders" / "b2.csv", "id", ["3"], mtime=t + 100)  # same ms as b1
    write_csv(landing / "orders" / "c.csv", "id", ["4"], mtime=t + 200)
    write_csv(landing / "other" / "x.csv", "id", ["9"], mtime=t)
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(landing),
        "source.files.format": "csv",
        "source.schema": "id INT",
        "data.publisher.final.dir": str(tmp_path / "lake"),
    }
    marks: dict[str, str] = {}
    run_and_publish(spark, spec(tmp_path, props), marks)
    stored = dict(marks)
    assert stored["orders"] == f"{_ms(t + 200)}:c.csv"

    def backfill(execution: int, low: str | None, high: str) -> tuple[list[dict[str, Any]], list[int]]:
        final = tmp_path / f"backfill{execution}"
        job = spec(
            tmp_path,
            {**props, "data.publisher.final.dir": str(final)},
            execution_id=execution,
            watermarks=marks,
            backfill={"orders": {"low": low, "high": high}},
        )
        states = run_job(spark, job)
        assert all(s["status"] == "SUCCEEDED" for s in states), [s["error"] for s in states]
        assert {s["dataset_urn"] for s in states} == {"orders"}  # 'other' is not run
        assert all("high_watermark" not in types for types in _types(plan_commit(job, states)).values())
        publish(job, states, marks)
        assert marks == stored
        ids = sorted(r.id for r in read(spark, final / "orders").collect()) if final.exists() else []
        return states, ids

    # Bare milliseconds cover the whole millisecond: (t, t+100] holds b1 and b2, not a, not c.
    states, ids = backfill(2, _ms(t), _ms(t + 100))
    assert ids == [2, 3]
    assert states[0]["expected_high_watermark"] == f"{_ms(t + 100)}:b2.csv"

    # ISO-8601 times (UTC), and the full <ms>:<path> form cutting between same-millisecond files.
    iso = dt.datetime.fromtimestamp(t - 1, dt.UTC).isoformat()
    states, ids = backfill(3, iso, f"{_ms(t + 100)}:b1.csv")
    assert ids == [1, 2]
    assert states[0]["low_watermark"] == iso

    # No low: from the first file; a high far in the future is clamped to the newest file.
    states, ids = backfill(4, None, "2999-01-01T00:00:00Z")
    assert ids == [1, 2, 3, 4]
    assert states[0]["low_watermark"] is None
    assert states[0]["expected_high_watermark"] == stored["orders"]

    # Nothing in range: an empty work unit, nothing published, no watermark.
    states, ids = backfill(5, _ms(t + 300), _ms(t + 400))
    assert ids == [] and states[0]["work_unit"]["empty"] is True

    # A bound that is no files watermark fails that dataset's task with the urn in the message.
    job = spec(tmp_path, props, execution_id=6, backfill={"orders": {"low": "last week", "high": _ms(t)}})
    states = run_job(spark, job)
    assert states[0]["status"] == "FAILED"
    assert "backfill ['orders']: 'last week' is not a files watermark" in states[0]["error"]
    assert plan_commit(job, states) == {"orders": []}
