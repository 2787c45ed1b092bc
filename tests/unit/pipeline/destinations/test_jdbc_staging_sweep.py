"""A run killed (or given up on) after staging, before its commit steps were stored, leaves its
staging tables beside the target: no later run of that execution comes back for them. The next
execution to publish the same target drops them — but never a staging table of a run still going
or of commit steps still stored, nor another job's or another target's."""

from __future__ import annotations

from typing import Any

import psycopg

from portal.pipeline.destinations.jdbc import (
    JdbcPublishCommitStep,
    staged_by,
    staging_prefix,
    staging_table_name,
)
from portal.pipeline.jobspec import JobSpec
from tests.builders.servers import mysql

JOB = "shop_orders_copy"


def step(url: str, user: str, target: str, execution: int) -> JdbcPublishCommitStep:
    return JdbcPublishCommitStep(
        {
            "dataset_urn": "orders",
            "branch": 0,
            "url": url,
            "user": user,
            "target_table": target,
            "staging_tables": [],
            "rows": 0,
            "execution_id": execution,
            "job_name": JOB,
        }
    )


def names(target: str, *executions: int, job: str = JOB) -> list[str]:
    specs = [JobSpec(job_name=job, flow_group="shop", flow_name="orders", execution_id=e) for e in executions]
    return [staging_table_name(target, spec, "task-0", 0).rpartition(".")[2] for spec in specs]


def test_a_staging_table_names_its_job_target_and_execution() -> None:
    [name] = names("public.orders_copy", 1_796_348_793_911)
    prefix = staging_prefix(JOB, "public.orders_copy")
    assert name.startswith(prefix) and len(name) <= 63
    assert staged_by(prefix, name) == 1_796_348_793_911
    assert staged_by(prefix, name + "_err") == 1_796_348_793_911  # its bad records' table
    assert staged_by(staging_prefix(JOB, "public.other"), name) is None


def test_postgresql_leftovers_of_earlier_runs_are_swept_and_the_rest_kept(
    pg: psycopg.Connection, pg_database: dict[str, Any]
) -> None:
    left, running, stored, own = names("public.orders_copy", 5, 7, 8, 9)
    [other_job] = names("public.orders_copy", 5, job="another_job")
    [other_target] = names("public.invoices", 5)
    every = [left, f"{left}_err", running, stored, own, other_job, other_target]
    for name in every:
        pg.execute(f"DROP TABLE IF EXISTS {name}; CREATE TABLE {name} (id int)")

    gone = step(pg_database["url"], pg_database["user"], "public.orders_copy", 9).sweep(keep={7, 8})

    assert sorted(gone) == sorted([left, f"{left}_err"])
    kept = {r[0] for r in pg.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'fp_stg%'")}
    assert kept >= {running, stored, own, other_job, other_target} and left not in kept
    for name in every:
        pg.execute(f"DROP TABLE IF EXISTS {name}")


def test_mariadb_leftovers_are_swept_inside_the_nodes_own_database(mysql_database: dict[str, Any]) -> None:
    db = mysql_database["db"]
    left, own = names("orders_copy", 5, 9)
    mysql(f"CREATE TABLE `{left}` (id int); CREATE TABLE `{own}` (id int)", db)

    gone = step(mysql_database["url"], "root", "orders_copy", 9).sweep(keep=set())

    assert gone == [left]
    remaining = mysql("SHOW TABLES LIKE 'fp_stg%'", db).split()
    assert remaining == [own]
    mysql(f"DROP TABLE `{own}`", db)
