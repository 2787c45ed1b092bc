"""The rules of whole schemas and schema drift, on plain values: which tables a pattern takes, what
counts as a widening, how a drift is worded, which column types a destination widens."""

from __future__ import annotations

import json
import sqlite3

from portal.pipeline.destinations import jdbc_evolution
from portal.pipeline.dialects import SQLITE
from portal.pipeline.schema import drift as schemadrift
from portal.pipeline.sources.jdbc_tables import Table, catalog_query, has_patterns, matching, resolve


def _schema(*fields: tuple[str, str]) -> str:
    return json.dumps(
        {
            "type": "struct",
            "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields],
        }
    )


CATALOG = [
    Table("public", "orders", True),
    Table("public", "customers", True),
    Table("public", "fp_stg_0123456789abcdef0123", True),  # Flowport's own staging table
    Table("sales", "orders_2024", False),
    Table("sales", "orders_2025", False),
    Table("sales", "refunds", False),
]


def test_a_schema_pattern_takes_every_table_of_the_schema_but_flowports_own() -> None:
    assert matching("public.*", CATALOG) == ["public.customers", "public.orders"]
    assert matching("sales.orders_*", CATALOG) == ["sales.orders_2024", "sales.orders_2025"]


def test_a_pattern_without_a_schema_matches_the_default_schema_by_bare_name() -> None:
    assert matching("*", CATALOG) == ["customers", "orders"]
    assert matching("orders*", CATALOG) == ["orders"]  # not sales.orders_2024: another schema


def test_names_keep_their_order_patterns_follow_and_exclusions_apply_to_both() -> None:
    entries = ["sales.refunds", "sales.*"]
    assert has_patterns(entries) and not has_patterns(["a", "public.b"])
    assert resolve(entries, CATALOG, []) == ["sales.refunds", "sales.orders_2024", "sales.orders_2025"]
    assert resolve(entries, CATALOG, ["*_2024"]) == ["sales.refunds", "sales.orders_2025"]
    assert resolve(["public.orders", "legacy"], [], ["legacy"]) == ["public.orders"]


def test_each_dialect_lists_its_catalog_in_one_query() -> None:
    assert "current_schema()" in catalog_query("postgresql")
    assert "DATABASE()" in catalog_query("mysql")
    assert "sqlite_master" in catalog_query("sqlite")


def test_widening_is_what_holds_every_old_value() -> None:
    assert schemadrift.widens("integer", "long") and schemadrift.widens("float", "double")
    assert schemadrift.widens("decimal(10,2)", "decimal(12,2)")
    assert not schemadrift.widens("decimal(10,2)", "decimal(10,3)")  # one integer digit fewer
    assert schemadrift.widens("integer", "decimal(12,0)") and not schemadrift.widens("long", "decimal(12,0)")
    assert not schemadrift.widens("long", "integer") and not schemadrift.widens("long", "string")


def test_a_drift_names_what_was_added_removed_widened_and_changed() -> None:
    recorded = _schema(("id", "integer"), ("name", "string"), ("fax", "string"), ("qty", "long"))
    current = _schema(("id", "long"), ("name", "string"), ("qty", "string"), ("email", "string"))
    drift = schemadrift.diff(recorded, current)
    assert drift.added == [("email", "string")] and drift.removed == [("fax", "string")]
    assert drift.widened == [("id", "integer", "long")] and drift.incompatible == [("qty", "long", "string")]
    assert drift.describe() == (
        "added email (string); removed fax (string); changed id integer -> long (widened); "
        "changed qty long -> string"
    )
    assert not schemadrift.diff(recorded, recorded) and not schemadrift.diff(None, current)


def test_nullability_alone_is_no_drift() -> None:
    strict = json.loads(_schema(("id", "long")))
    strict["fields"][0]["nullable"] = False
    assert not schemadrift.diff(_schema(("id", "long")), json.dumps(strict))


def test_a_destination_widens_only_to_a_type_that_holds_every_value() -> None:
    wider = jdbc_evolution.wider
    assert wider("integer", "bigint") and wider("int(11)", "bigint(20)") and wider("real", "double precision")
    assert wider("numeric(10,2)", "numeric(14,2)") and wider("character varying(10)", "text")
    assert (
        not wider("bigint", "integer") and not wider("bigint(20)", "bigint") and not wider("text", "integer")
    )


def test_a_sqlite_destination_takes_the_new_column_and_keeps_its_rows(tmp_path) -> None:
    """SQLite stores every integer in 64 bits: only the missing column is added, nothing widened."""
    with sqlite3.connect(tmp_path / "sink.db") as conn:
        conn.execute("CREATE TABLE sink (id INTEGER, name TEXT)")
        conn.execute("INSERT INTO sink VALUES (1, 'a')")
        conn.execute("CREATE TABLE fp_stg_1 (id BIGINT, name TEXT, email TEXT)")
        statements = jdbc_evolution.evolve(SQLITE, conn.execute, "sink", "fp_stg_1")
        assert statements == ['ALTER TABLE "sink" ADD COLUMN "email" TEXT']
        assert jdbc_evolution.evolve(SQLITE, conn.execute, "sink", "fp_stg_1") == []  # a re-run: nothing
        assert conn.execute("SELECT id, name, email FROM sink").fetchall() == [(1, "a", None)]
