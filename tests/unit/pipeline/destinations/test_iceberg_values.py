"""Every value of the PostgreSQL value table (tests/values.py) arrives in an Iceberg table as it
left, merged by key: each column with the type Parquet gives it (README, "Types") — decimal with
its precision and scale, a wall time without a zone, an instant in UTC, every byte of a bytea, NaN
and the infinities, lists — and the rest as the server's text."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa

from portal.pipeline.destinations.iceberg import load_catalog
from tests.values import COLUMNS, PARQUET, ROWS, assert_same_row, create_sql, texts

from ..helpers import run_and_publish, spec

JDBC = "portal.pipeline.sources.jdbc.JdbcSource"
TYPED = {c: t for c, t in PARQUET.items() if c != "nn"} | {
    "i2": pa.int32(),  # Iceberg has no 16-bit integer: its int holds every smallint
    "arr": pa.list_(pa.int32()),
    "tags": pa.list_(pa.string()),
}


def test_every_value_arrives_in_an_iceberg_table_as_it_left(spark, pg, pg_database, tmp_path: Path):
    source = f"iv_{uuid.uuid4().hex[:6]}"
    pg.execute(create_sql(source))
    pg.execute(f"INSERT INTO {source} VALUES {', '.join(ROWS)}")  # noqa: S608
    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path / "warehouse"
    props = {
        "source.class": JDBC,
        "source.jdbc.url": pg_database["url"],
        "source.conn.username": pg_database["user"],
        "source.jdbc.tables": source,
        "extract.is.full": "true",
        "extract.primary.key.fields": "id",
        "writer.output.format": "ICEBERG",
        "writer.iceberg.catalog.uri": uri,
        "writer.iceberg.warehouse": str(warehouse),
        "writer.iceberg.namespace": "lake",
        "writer.iceberg.table": "values",
        "writer.iceberg.write.mode": "merge",
    }
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert [s.get("error") for s in states] == [None], states

    lake = load_catalog(uri, None, str(warehouse)).load_table(("lake", "values")).scan().to_arrow()
    assert {c: lake.schema.field(c).type for c in TYPED} == TYPED
    assert all(
        lake.schema.field(c).type in (pa.string(), pa.large_string()) for c in COLUMNS if c not in TYPED
    )
    want = {r[0]: dict(zip(COLUMNS, r, strict=True)) for r in pg.execute(f"SELECT * FROM {source}")}  # noqa: S608
    text = {int(r[0]): dict(zip(COLUMNS, r, strict=True)) for r in texts(pg, source)}
    got = {row["id"]: row for row in lake.to_pylist()}
    assert sorted(got) == [1, 2, 3, 4]
    for key, row in got.items():
        assert_same_row(row, want[key], text[key], TYPED)
