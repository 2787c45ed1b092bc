"""A PostgreSQL ``numeric(p,s)`` wider than Spark's 38 digits arrives through change data capture
as it left: Spark has no decimal that holds it, so it is carried as the server's text, every
digit, snapshot and log alike, into a Parquet change log as that text and into a merged PostgreSQL
table as ``numeric(p,s)`` again (README, "Types") — never a run failing without naming it."""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.builders.props import change_log_merged_into, into_parquet
from tests.pg_logical import logical_pg, own_database  # noqa: F401 (fixture)

from ..helpers import data_files, run_and_publish, spec

CDC = "portal.pipeline.sources.cdc.CdcSource"
WHOLE = "1" + "0" * 43 + "1"  # 45 digits
SNAPSHOT = [(1, "1.0123456789", WHOLE), (2, "-0.0000000001", "-" + WHOLE)]
LOGGED = [(3, "1234567890123456789012345678901234567890.0123456789", "0"), (4, "0.0000000000", "7")]


def test_a_numeric_wider_than_38_digits_keeps_every_digit(spark, logical_pg, tmp_path: Path, pg, pg_database):  # noqa: F811
    create = "CREATE TABLE shop.w (id int PRIMARY KEY, amount numeric(50,10), whole numeric(45,0))"
    with own_database(logical_pg, "CREATE SCHEMA shop", create) as source:
        rows = ", ".join(f"({i}, {a}, {w})" for i, a, w in SNAPSHOT)
        source["db"].execute(f"INSERT INTO shop.w VALUES {rows}")  # noqa: S608
        target = f"cdc_wide_{uuid.uuid4().hex[:6]}"
        common = {
            "source.class": CDC,
            "source.jdbc.url": source["url"],
            "source.conn.username": "postgres",
            "source.cdc.tables": "shop.w",
        }
        merged = {**common, **change_log_merged_into(pg_database["url"], pg_database["user"], target)}
        files = {**common, **into_parquet(tmp_path / "out")}
        jobs = {
            "merged": spec(tmp_path / "merged", merged, flow_id=61),
            "files": spec(tmp_path / "files", files, flow_id=62, job_name="files"),
        }
        marks: dict[str, dict[str, str]] = {name: {} for name in jobs}
        for execution in (1, 2):  # the snapshot, then the log
            for name, job in jobs.items():
                job["execution_id"] = 600 + execution
                states = run_and_publish(spark, job, marks[name])
                assert [s.get("error") for s in states] == [None], states
            if execution == 1:
                rows = ", ".join(f"({i}, {a}, {w})" for i, a, w in LOGGED)
                source["db"].execute(f"INSERT INTO shop.w VALUES {rows}")  # noqa: S608

    want = [(i, Decimal(a), Decimal(w)) for i, a, w in SNAPSHOT + LOGGED]
    assert pg.execute(f"SELECT id, amount, whole FROM {target} ORDER BY id").fetchall() == want  # noqa: S608
    kinds = pg.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
        " WHERE attrelid = %s::regclass AND attname IN ('amount', 'whole') ORDER BY attname",
        (target,),
    ).fetchall()
    assert kinds == [("amount", "numeric(50,10)"), ("whole", "numeric(45,0)")]

    log = pa.concat_tables([pq.read_table(p) for p in data_files(tmp_path / "out" / "shop.w")])
    assert log.schema.field("amount").type == pa.string()
    got = sorted((r["id"], r["amount"], r["whole"]) for r in log.to_pylist())
    assert got == [(i, a, w) for i, a, w in SNAPSHOT + LOGGED]
