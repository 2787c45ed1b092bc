"""Every value a files source reads arrives as it left (issue #48): one Parquet file written by
pyarrow with its native types, and one CSV and one JSON-lines file of the same rows read with a
declared schema (``source.schema``), each carried into Parquet files, a PostgreSQL table, a MariaDB
table and an Iceberg table and read back with that destination's own client — integers at their
limits, decimals at their precision's edge, float edges (NaN and the infinities where the
destination holds them), text with quotes, newlines, tabs, backslashes, emoji, CJK, ``NULL`` and
``\\N``, empty against NULL, every byte (Parquet), dates and times before 1970 and after 2038. What
inference gives instead, and the CSV reader's defaults, are asserted as README "Types" documents."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pymysql
import pytest

from portal.pipeline.destinations.iceberg import load_catalog
from tests.builders.servers import MYSQL_HOST, MYSQL_PORT

from ..helpers import NOW, data_files, run_and_publish, spec

FILES = "portal.pipeline.sources.files.FileSource"
UTC = dt.UTC
ARROW = {
    "id": pa.int32(), "i1": pa.int8(), "i2": pa.int16(), "i4": pa.int32(), "i8": pa.int64(),
    "n": pa.decimal128(12, 2), "nn": pa.decimal128(38, 10), "f4": pa.float32(), "f8": pa.float64(),
    "s": pa.string(), "w": pa.string(), "code": pa.string(), "b": pa.binary(), "ok": pa.bool_(),
    "d": pa.date32(), "ts": pa.timestamp("us"), "tstz": pa.timestamp("us", tz="UTC"),
}  # fmt: skip
# What CSV and JSON declare (they have no binary)
DDL = (
    "id INT, i1 TINYINT, i2 SMALLINT, i4 INT, i8 BIGINT, n DECIMAL(12,2), nn DECIMAL(38,10), f4 FLOAT,"
    " f8 DOUBLE, s STRING, w STRING, code STRING, ok BOOLEAN, d DATE, ts TIMESTAMP_NTZ, tstz TIMESTAMP"
)
TEXT_COLUMNS = [c for c in ARROW if c != "b"]
# The column types each destination's table gets (Parquet's are ARROW's; Iceberg has no 8- or
# 16-bit integer)
POSTGRESQL = {
    "id": "integer",
    "i1": "smallint",
    "i2": "smallint",
    "i4": "integer",
    "i8": "bigint",
    "n": "numeric(12,2)",
    "nn": "numeric(38,10)",
    "f4": "real",
    "f8": "double precision",
    "s": "text",
    "w": "text",
    "code": "text",
    "b": "bytea",
    "ok": "boolean",
    "d": "date",
    "ts": "timestamp without time zone",
    "tstz": "timestamp with time zone",
}
MARIADB = {
    "id": "int(11)",
    "i1": "tinyint(4)",
    "i2": "smallint(6)",
    "i4": "int(11)",
    "i8": "bigint(20)",
    "n": "decimal(12,2)",
    "nn": "decimal(38,10)",
    "f4": "float",
    "f8": "double",
    "s": "longtext",
    "w": "longtext",
    "code": "longtext",
    "b": "longblob",
    "ok": "tinyint(1)",
    "d": "date",
    "ts": "datetime(6)",
    "tstz": "datetime(6)",
}
ICEBERG = {c: t for c, t in ARROW.items() if c not in ("s", "w", "code", "b")} | {
    "i1": pa.int32(),
    "i2": pa.int32(),
}
BIG = Decimal("9999999999999999999999999999.9999999999")
ROWS: list[dict[str, Any]] = [
    {
        "id": 1, "i1": -128, "i2": -32768, "i4": -(2**31), "i8": -(2**63), "n": Decimal("-9999999999.99"),
        "nn": Decimal("-" + str(BIG)), "f4": -3.3999999521443642e38, "f8": 1.7976931348623157e308,
        "s": "quote ' \" back\\slash\nnew\ttab, comma", "w": "NULL", "code": "007",
        "b": bytes(range(256)), "ok": True, "d": dt.date(1000, 1, 1),
        "ts": dt.datetime(1901, 12, 14, 20, 45, 52, 1),
        "tstz": dt.datetime(1969, 7, 20, 20, 17, 40, 123456, tzinfo=UTC),
    },
    {
        "id": 2, "i1": 127, "i2": 32767, "i4": 2**31 - 1, "i8": 2**63 - 1, "n": Decimal("9999999999.99"),
        "nn": BIG, "f4": 1.401298464324817e-45, "f8": -2.2250738585072014e-308,
        "s": "🙂 中文 \\N \"q\"", "w": "\\N", "code": "010", "b": b"\x00", "ok": False,
        "d": dt.date(2040, 2, 29), "ts": dt.datetime(2040, 2, 29, 23, 59, 59, 999999),
        "tstz": dt.datetime(2040, 1, 1, 13, 4, 5, 123456, tzinfo=UTC),
    },
    {
        "id": 3, "i1": 0, "i2": 0, "i4": 0, "i8": 0, "n": Decimal("0.01"), "nn": Decimal("-0.0000000001"),
        "f4": 0.0, "f8": -0.0, "s": "", "w": "", "code": "1e3", "b": b"", "ok": None,
        "d": dt.date(1969, 12, 31), "ts": dt.datetime(1970, 1, 1), "tstz": dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    },
    {"id": 4, **{c: None for c in ARROW if c != "id"}},
]  # fmt: skip
# NaN, the infinities and float32's largest, in a file of their own: MariaDB refuses the first
# two (README); float32's largest has its own MariaDB story below
SPECIAL: list[dict[str, Any]] = [
    {"id": 8, **{c: None for c in ARROW if c != "id"}, "f4": 3.4028234663852886e38, "f8": 5e-324},
    {"id": 5, **{c: None for c in ARROW if c != "id"}, "f4": math.nan, "f8": math.inf},
    {"id": 6, **{c: None for c in ARROW if c != "id"}, "f4": -math.inf, "f8": math.nan},
    {"id": 7, **{c: None for c in ARROW if c != "id"}, "f4": math.inf, "f8": -math.inf},
]


def csv_text(value: Any) -> str:
    """A value as RFC 4180 writes it: NULL as nothing, the empty string as ``""``, a quote doubled."""
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[repr(value)]
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    text = str(value)
    return '"' + text.replace('"', '""') + '"' if not text or any(c in text for c in ',"\n\r') else text


def json_text(row: dict[str, Any]) -> str:
    """A JSON line: decimals as exact numbers, NaN and the infinities as strings (as Spark reads)."""
    parts = []
    for column in TEXT_COLUMNS:
        value = row[column]
        if isinstance(value, Decimal):
            text = str(value)
        elif isinstance(value, dt.date) or (isinstance(value, float) and not math.isfinite(value)):
            text = json.dumps(csv_text(value))
        else:
            text = json.dumps(value, ensure_ascii=False)
        parts.append(f'"{column}": {text}')
    return "{" + ", ".join(parts) + "}"


def write_sources(root: Path) -> None:
    """One folder per format, each a dataset ``values`` of two files: finite values, and NaN/±Inf."""
    for name, rows in (("finite", ROWS), ("special", SPECIAL)):
        folder = root / "parquet" / "values"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(ARROW)), folder / f"{name}.parquet")
        csv = root / "csv" / "values" / f"{name}.csv"
        csv.parent.mkdir(parents=True, exist_ok=True)
        lines = [",".join(TEXT_COLUMNS)] + [",".join(csv_text(r[c]) for c in TEXT_COLUMNS) for r in rows]
        csv.write_text("\n".join(lines) + "\n", encoding="utf-8")
        jsonl = root / "json" / "values" / f"{name}.jsonl"
        jsonl.parent.mkdir(parents=True, exist_ok=True)
        jsonl.write_text("".join(json_text(r) + "\n" for r in rows), encoding="utf-8")
    for path in root.rglob("*.*"):
        os.utime(path, (NOW - 60, NOW - 60))


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("files_values")
    write_sources(root)
    return root


RFC4180 = {
    "source.files.option.escape": '"',
    "source.files.option.multiLine": "true",
    "source.files.option.nullValue": "\u2400",  # a text the file never holds: only ,, is NULL
}


def source(landing: Path, fmt: str, finite_only: bool) -> dict[str, str]:
    props = {
        "source.class": FILES,
        "source.files.path": str(landing / fmt),
        "source.files.format": fmt,
        "source.files.datasets": "values",
    }
    if fmt != "parquet":
        props["source.schema"] = DDL
    if fmt == "csv":  # RFC 4180 (README "Types"): a doubled quote, a quoted newline, "" not NULL
        props |= RFC4180
    if finite_only:
        props["source.files.glob"] = "finite.*"
    return props


# ---------------------------------------------------------------- comparing, value for value


def same_float(found: Any, value: float, width: str) -> bool:
    if math.isnan(value):
        return found is not None and math.isnan(found)
    return found is not None and struct.pack(width, found) == struct.pack(width, value)  # -0.0 too


def assert_same(got: dict[str, Any], want: dict[str, Any], columns: list[str], destination: str) -> None:
    for column in columns:
        value, found, where = want[column], got[column], (want["id"], column)
        if value is None:
            assert found is None, (*where, found)
        elif column in ("f4", "f8") and destination == "mariadb" and value == 0:  # it has no -0.0
            assert found == 0 and math.copysign(1, found) == 1, (*where, found)
        elif column in ("f4", "f8"):
            assert same_float(found, value, "f" if column == "f4" else "d"), (*where, found, value)
        elif column == "tstz" and destination == "mariadb":  # its UTC time in a DATETIME(6)
            assert found == value.replace(tzinfo=None), (*where, found)
        elif column == "ok" and destination == "mariadb":
            assert bool(found) is value, (*where, found)
        else:
            assert found == value, (*where, found, value)


def read_parquet(out: Path) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in data_files(out / "values")])


def arrow_types(schema: pa.Schema) -> dict[str, pa.DataType]:
    return {field.name: field.type for field in schema}


def read_postgresql(conninfo: dict[str, Any], table: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    with psycopg.connect(**conninfo) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        rows = cur.execute(f'SELECT * FROM "{table}"').fetchall()  # noqa: S608
        kinds = cur.execute(
            "SELECT attname, format_type(atttypid, atttypmod) AS kind FROM pg_attribute"
            " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
            (f'"{table}"',),
        ).fetchall()
    return rows, {k["attname"]: k["kind"] for k in kinds}


def read_mariadb(db: str, table: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    conn = pymysql.connect(host=MYSQL_HOST, port=MYSQL_PORT, user="root", password="", database=db)
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(f"SELECT * FROM `{table}`")  # noqa: S608
            rows = list(cur.fetchall())
            cur.execute(
                "SELECT column_name AS c, column_type AS k FROM information_schema.columns"
                " WHERE table_schema = %s AND table_name = %s",
                (db, table),
            )
            return rows, {k["c"]: k["k"] for k in cur.fetchall()}
    finally:
        conn.close()


# ---------------------------------------------------------------- the stories


@pytest.mark.parametrize("destination", ["parquet", "postgresql", "mariadb", "iceberg"])
@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_every_value_of_a_file_arrives_as_it_left(
    spark, landing, pg_database, mysql_database, tmp_path: Path, fmt: str, destination: str
):
    table = f"fv_{fmt}_{destination}"
    props = source(landing, fmt, finite_only=destination == "mariadb")
    if destination == "parquet":
        props |= {"writer.output.format": "parquet", "data.publisher.final.dir": str(tmp_path / "out")}
    elif destination == "iceberg":
        uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path / "warehouse"
        props |= {
            "writer.output.format": "ICEBERG",
            "writer.iceberg.catalog.uri": uri,
            "writer.iceberg.warehouse": str(warehouse),
            "writer.iceberg.namespace": "lake",
            "writer.iceberg.table": "values",
        }
    else:
        db = pg_database if destination == "postgresql" else mysql_database
        props |= {
            "writer.output.format": "jdbc",
            "writer.jdbc.url": db["url"],
            "writer.jdbc.username": db["user"],
            "writer.jdbc.table": table,
        }
    states = run_and_publish(spark, spec(tmp_path, props, job_name=table), {})
    assert [s.get("error") for s in states] == [None], states

    columns = ARROW if fmt == "parquet" else TEXT_COLUMNS
    if destination == "parquet":
        copy = read_parquet(tmp_path / "out")
        rows, kinds, want_kinds = copy.to_pylist(), arrow_types(copy.schema), ARROW
    elif destination == "iceberg":
        copy = load_catalog(uri, None, str(warehouse)).load_table(("lake", "values")).scan().to_arrow()
        rows, kinds, want_kinds = copy.to_pylist(), arrow_types(copy.schema), ICEBERG
    elif destination == "postgresql":
        rows, kinds = read_postgresql(pg_database["conninfo"], table)
        want_kinds = POSTGRESQL
    else:
        rows, kinds = read_mariadb(mysql_database["db"], table)
        want_kinds = MARIADB
    assert {c: kinds[c] for c in columns if c in want_kinds} == {
        c: want_kinds[c] for c in columns if c in want_kinds
    }
    want = ROWS + ([] if destination == "mariadb" else SPECIAL)
    got = {row["id"]: row for row in rows}
    assert sorted(got) == sorted(r["id"] for r in want)
    for row in want:
        assert_same(got[row["id"]], row, list(columns), destination)
    if fmt == "parquet":
        assert got[1]["b"] == bytes(range(256)) and got[2]["b"] == b"\x00" and got[3]["b"] == b""


def files_run(spark, tmp_path: Path, props: dict[str, str]) -> tuple[list[dict[str, Any]], pa.Schema]:
    """Run ``props`` into Parquet files; the states, and the rows and schema pyarrow reads back."""
    props = {**props, "writer.output.format": "parquet", "data.publisher.final.dir": str(tmp_path / "out")}
    states = run_and_publish(spark, spec(tmp_path, props), {})
    if any(s.get("error") for s in states):
        return states, pa.schema([])
    table = pa.concat_tables([pq.read_table(p) for p in data_files(tmp_path / "out" / "values")])
    return sorted(table.to_pylist(), key=lambda r: r["id"]), table.schema


def test_csv_inference_reads_what_looks_like_a_number_as_one(spark, landing, tmp_path: Path):
    props = source(landing, "csv", finite_only=False)
    del props["source.schema"]
    rows, schema = files_run(spark, tmp_path, props)

    kinds = {name: schema.field(name).type for name in TEXT_COLUMNS}
    assert kinds == {
        **dict.fromkeys(["id", "i1", "i2", "i4", "i8"], pa.int64()),  # integers: bigint
        **dict.fromkeys(["n", "nn", "f4", "f8", "code"], pa.float64()),  # a fraction, an exponent
        **dict.fromkeys(["s", "w"], pa.string()),
        "ok": pa.bool_(), "d": pa.date32(),
        **dict.fromkeys(["ts", "tstz"], pa.timestamp("us", tz="UTC")),  # a wall time read as UTC
    }  # fmt: skip
    by_id = {r["id"]: r for r in rows}
    # altered silently (README "Types": declare source.schema)
    assert [by_id[i]["code"] for i in (1, 2, 3)] == [7.0, 10.0, 1000.0]  # "007", "010", "1e3"
    assert (by_id[1]["nn"], by_id[2]["nn"]) == (-1e28, 1e28)  # 38 digits rounded to a double's 17
    # kept: integers at their limits, text, NULL against "" (with the RFC 4180 options), dates
    for row in ROWS:
        for column in ("i1", "i2", "i4", "i8", "s", "w", "ok", "d"):
            assert by_id[row["id"]][column] == row[column], (row["id"], column)
    assert by_id[1]["ts"] == ROWS[0]["ts"].replace(tzinfo=UTC)  # the wall time, as a UTC instant
    assert math.isnan(by_id[5]["f4"]) and by_id[7]["f8"] == -math.inf


def test_json_inference_reads_a_fraction_as_a_double_and_times_as_their_text(spark, landing, tmp_path: Path):
    props = source(landing, "json", finite_only=False)
    del props["source.schema"]
    rows, schema = files_run(spark, tmp_path, props)

    kinds = {name: schema.field(name).type for name in TEXT_COLUMNS}
    assert kinds == {
        **dict.fromkeys(["id", "i1", "i2", "i4", "i8"], pa.int64()),
        **dict.fromkeys(["n", "nn"], pa.float64()),
        # "NaN" and "Infinity" are strings in JSON: a column mixing them with numbers is text
        **dict.fromkeys(["f4", "f8", "s", "w", "code", "d", "ts", "tstz"], pa.string()),
        "ok": pa.bool_(),
    }  # fmt: skip
    by_id = {r["id"]: r for r in rows}
    assert (by_id[1]["nn"], by_id[2]["nn"]) == (-1e28, 1e28)  # altered silently: declare the schema
    assert by_id[1]["code"] == "007" and by_id[3]["s"] == "" and by_id[4]["s"] is None
    for row in ROWS:
        for column in ("i1", "i2", "i4", "i8", "s", "w", "code", "ok"):
            assert by_id[row["id"]][column] == row[column], (row["id"], column)
    assert (by_id[1]["ts"], by_id[2]["tstz"]) == ("1901-12-14T20:45:52.000001", "2040-01-01T13:04:05.123456Z")
    assert by_id[5]["f4"] == "NaN" and by_id[1]["f8"] == "1.7976931348623157e+308"  # the text as written


def test_csv_defaults_keep_spark_escaping_and_read_an_empty_string_as_null(spark, tmp_path: Path):
    folder = tmp_path / "landing" / "values"
    folder.mkdir(parents=True)
    # RFC 4180 (a doubled quote, "" for the empty string) beside Spark's own writer (a backslash)
    lines = ["id,s", '1,"q""x"', '2,""', "3,", '4,"a\\"b"', "5,plain \\N"]
    (folder / "a.csv").write_text("\n".join(lines) + "\n")
    os.utime(folder / "a.csv", (NOW - 60, NOW - 60))
    props = {
        "source.class": FILES,
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "source.schema": "id INT, s STRING",
    }
    rows, _ = files_run(spark, tmp_path / "defaults", props)
    assert [(r["id"], r["s"]) for r in rows] == [
        (1, '"q""x"'),  # a doubled quote is not unescaped: the field as it stands, quotes and all
        (2, None),  # "" is NULL, as an empty field is
        (3, None),
        (4, 'a"b'),  # Spark's escape, a backslash (what its CSV writer writes)
        (5, "plain \\N"),
    ]
    rows, _ = files_run(spark, tmp_path / "rfc", {**props, **RFC4180})
    assert [(r["id"], r["s"]) for r in rows] == [
        (1, 'q"x'),
        (2, ""),
        (3, None),
        (4, '"a\\"b"'),  # and now Spark's own escaping is the field as it stands: hence the default
        (5, "plain \\N"),
    ]


@pytest.mark.parametrize("declared", [True, False])
def test_a_quoted_newline_without_multiline_is_a_bad_record_not_a_silent_split(
    spark, landing, tmp_path, declared: bool
):
    props = source(landing, "csv", finite_only=True)
    del props["source.files.option.multiLine"]
    if not declared:
        del props["source.schema"]
    states, _ = files_run(spark, tmp_path, props)
    errors = " ".join(s.get("error") or "" for s in states)
    assert "bad record" in errors and "expected 16" in errors, errors
    assert not (tmp_path / "out" / "values").exists()  # nothing published


def test_float32s_largest_arrives_in_a_mariadb_float_exactly(spark, mysql_database, tmp_path: Path):
    folder = tmp_path / "landing" / "values"
    folder.mkdir(parents=True)
    edge = {"id": [1], "f4": [3.4028234663852886e38]}
    pq.write_table(
        pa.table(edge, schema=pa.schema({"id": pa.int32(), "f4": pa.float32()})), folder / "a.parquet"
    )
    os.utime(folder / "a.parquet", (NOW - 60, NOW - 60))
    props = {
        "source.class": FILES,
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "parquet",
        "writer.output.format": "jdbc",
        "writer.jdbc.url": mysql_database["url"],
        "writer.jdbc.username": mysql_database["user"],
        "writer.jdbc.table": "fv_float_edge",
    }
    states = run_and_publish(spark, spec(tmp_path, props, job_name="fv_float_edge"), {})
    assert [s.get("error") for s in states] == [None], states
    # Sent as a double: its shortest float text (3.4028235E38) is past a FLOAT's end and was refused.
    _, kinds = read_mariadb(mysql_database["db"], "fv_float_edge")
    assert kinds["f4"] == "float", kinds
    conn = pymysql.connect(
        host=MYSQL_HOST, port=MYSQL_PORT, user="root", password="", database=mysql_database["db"]
    )
    try:  # as a double: the client's text of a FLOAT keeps 6 digits
        with conn.cursor() as cur:
            cur.execute("SELECT CAST(f4 AS DOUBLE) FROM fv_float_edge")
            (stored,) = cur.fetchone()
    finally:
        conn.close()
    assert same_float(stored, 3.4028234663852886e38, "f"), stored
