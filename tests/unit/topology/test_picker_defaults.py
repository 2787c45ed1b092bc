"""What discovery and the source picker suggest before the user chooses anything: a decimal
shown with its precision and scale, one verdict per column on whether a run can follow it as
a watermark, the best candidate chosen by default, and one primary key shared by the picker's
ticks and the flow form's box."""

from __future__ import annotations

import sqlite3

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from portal.pipeline.discovery.files import file_dataset
from portal.topology import connections, picker, services
from portal.topology.connections import Column

pytestmark = pytest.mark.django_db


def test_a_parquet_footer_shows_decimals_with_precision_and_marks_its_moments(tmp_path):
    path = tmp_path / "sales.parquet"
    table = pa.table(
        {
            "id": pa.array([1], pa.int64()),
            "amount": pa.array([None], pa.decimal128(12, 2)),
            "sold_at": pa.array([0], pa.timestamp("us", tz="UTC")),
            "day": pa.array([0], pa.date32()),
        }
    )
    pq.write_table(table, path)

    dataset = file_dataset(str(path), "sales.parquet", "parquet")

    shown = {c.name: (c.type, c.watermark_verdict) for c in dataset.columns}
    assert shown == {
        "id": ("int64", "no"),
        "amount": ("decimal(12,2)", "no"),
        "sold_at": ("timestamp[us, tz=UTC]", "no: a timestamp; files follow their modification time"),
        "day": ("date32[day]", "no: a date; files follow their modification time"),
    }


def test_money_and_floats_are_no_cursor_timestamps_and_ids_are():
    columns = connections.mark_candidates(
        [
            Column("id", "bigint", key_position=1),
            Column("price", "numeric(12,2)"),
            Column("ratio", "double precision"),
            Column("updated_at", "timestamp with time zone"),
            Column("quantity", "integer"),
            Column("seen_at", "timestamp with time zone[]"),
            Column("stay", "daterange"),
        ]
    )
    verdicts = {c.name: (c.watermark_suitable, c.watermark_verdict) for c in columns}
    assert verdicts == {
        "id": (True, "yes: integer primary key"),
        "price": (False, "no"),
        "ratio": (False, "no"),
        "updated_at": (True, "yes: timestamp"),
        "quantity": (True, "no"),  # of a cursor's type, but nothing says it grows
        "seen_at": (False, "no"),  # an array of timestamps: not ordered
        "stay": (False, "no"),  # a range of dates: not ordered
    }


@pytest.mark.parametrize(
    ("columns", "best"),
    [
        ([("id", "bigint", 1), ("created_at", "timestamp", 0), ("updated_at", "timestamp", 0)], "updated_at"),
        ([("id", "bigint", 1), ("created_at", "timestamp", 0)], "created_at"),
        ([("booked", "date", 0), ("id", "bigint", 1)], "id"),
        ([("booked", "date", 0), ("amount", "numeric(12,2)", 0)], "booked"),
        ([("name", "text", 0), ("amount", "numeric(12,2)", 0)], ""),
    ],
)
def test_the_picker_defaults_to_the_best_watermark_candidate(columns, best):
    marked = connections.mark_candidates([Column(name, kind, key) for name, kind, key in columns])
    chosen = picker.Pickable("t", marked, primary_key=[c.name for c in marked if c.key_position])

    assert chosen.best_watermark == best
    assert picker.picks_for({}, chosen).watermark == best  # nothing picked yet: the suggestion


def test_the_key_ticks_follow_the_primary_key_box_and_only_the_box_is_saved():
    chosen = picker.Pickable(
        "orders",
        [Column("id", "bigint", 1), Column("region", "text"), Column("note", "text")],
        primary_key=["id"],
    )
    assert picker.key_for({}, chosen) == {"id"}  # the catalog's key, suggested
    assert picker.key_for({"primary_key": "region, id"}, chosen) == {"region", "id"}  # the box is the key
    assert picker.key_for({"primary_key": "sku"}, chosen) == {"id"}  # not this table's: the suggestion
    posted = {"pick_for": "orders", "pick_primary_key": ["note"], "primary_key": ""}
    assert picker.key_for(posted, chosen) == {"note"}

    picks = {"pick_dataset": "orders", "pick_primary_key": ["id"], "pick_watermark": "id"}
    assert picker.picked_properties({**picks, "primary_key": "id"}, "jdbc") == {
        "source.jdbc.tables": "orders",
        "extract.delta.fields": "id",
    }  # the form puts the box's key, once
    assert picker.picked_properties(picks, "jdbc")["extract.primary.key.fields"] == "id"  # no box


@pytest.fixture
def shop(tmp_path):
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, amount NUMERIC(12,2), ssn TEXT, updated_at TIMESTAMP)"
        )
    return services.create_data_node(
        {"name": "shop", "kind": "jdbc", "properties": {"url": f"jdbc:sqlite:{path}"}}
    )


def test_a_saved_flows_picks_are_restored_exactly_or_not_at_all(owner, shop):
    saved = {
        "source.jdbc.tables": "orders",
        "extract.delta.fields": "updated_at",
        "extract.primary.key.fields": "id",
        "columns.drop": "ssn",
        "columns.hash": "amount",
        "writer.output.format": "PARQUET",
    }
    shown = picker.restored(owner, "shop", saved)

    assert shown is not None and shown["chosen"].name == "orders"
    picks = shown["picks"]
    assert picks.columns == {"id", "amount", "updated_at"} and picks.rules == {"amount": "hash"}
    assert picks.watermark == "updated_at" and picks.primary_key == {"id"}

    full = {"source.jdbc.tables": "orders", "extract.is.full": "true"}
    assert picker.restored(owner, "shop", full)["picks"].watermark == ""  # none, as saved
    assert picker.restored(owner, "shop", {**saved, "columns.drop": "gone"}) is None  # not the table's
    assert picker.restored(owner, "shop", {**saved, "source.jdbc.tables": "ord%"}) is None  # a pattern
    assert picker.restored(owner, "shop", {"source.jdbc.tables": "orders"}) is None  # no watermark said
