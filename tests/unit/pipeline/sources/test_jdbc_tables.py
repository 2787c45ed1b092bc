"""A pattern's matches are named as SQL names the tables: on PostgreSQL, whose unquoted names fold
to lower case, a part other than a plain lower-case identifier is quoted; an exclusion matches the
name as written or as the catalog spells it."""

from __future__ import annotations

from portal.pipeline.sources.jdbc_tables import Table, resolve

CATALOG = [Table("Sales", "Orders"), Table("sales", "items"), Table("public", "MixedCase", True)]


def test_postgresql_names_are_quoted_where_the_server_would_fold_them():
    assert resolve(["*.*", "Mixed*"], CATALOG, [], "postgresql") == [
        '"Sales"."Orders"',
        'public."MixedCase"',
        "sales.items",
        '"MixedCase"',
    ]


def test_other_dialects_keep_the_catalogs_spelling():
    assert resolve(["Sales.*"], CATALOG, [], "mysql") == ["Sales.Orders"]


def test_an_exclusion_matches_the_name_with_or_without_its_quotes():
    assert resolve(["*.*"], CATALOG, ["Sales.*"], "postgresql") == ['public."MixedCase"', "sales.items"]
    assert resolve(["*.*"], CATALOG, ['"Sales"."Orders"'], "postgresql") == [
        'public."MixedCase"',
        "sales.items",
    ]
