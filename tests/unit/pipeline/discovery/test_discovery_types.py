"""Discovery types a CSV or JSON-lines file as the run will read it: a user picks columns and a
watermark from what the portal shows, so it must be what Spark infers (`inferSchema`, the files
source's CSV integers as bigint), checked here against Spark itself on the same real files."""

from __future__ import annotations

import csv
import json
import logging
import time

from portal.pipeline.discovery import sniffing
from portal.pipeline.discovery.files import file_dataset
from portal.pipeline.sources.files import _widened

# py4j logs "closing connection" from __del__ after pytest closed its streams; keep it quiet.
logging.getLogger("py4j").setLevel(logging.WARNING)

# One column per case: the first and second row's value (an empty value is null).
CSV_CASES = {
    "small_ints": ("1", "2"),
    "wide_ints": ("1", "3000000000"),
    "huge_ints": ("12345678901234567890", "5"),
    "too_huge": ("1" * 42, "1"),
    "fractions": ("1.5", "2"),
    "exponent": ("1e3", "2"),
    "suffixed": ("1.5d", "2"),
    "signed": ("+5", "-3"),
    "padded": (" 5", "6"),
    "specials": ("NaN", "-Inf"),
    "infinity": ("Infinity", "1"),
    "booleans": ("TRUE", "false"),
    "dates": ("2026-01-01", "2026-12-31"),
    "dates_and_nulls": ("2026-01-01", ""),
    "short_dates": ("2026-1-2", "2026-01-01"),
    "dates_and_times": ("2026-01-01", "2026-01-02 10:00:00.123"),
    "iso_times": ("2026-01-01T10:00:00Z", "2026-01-01T10:00:00+01:00"),
    "minutes": ("2026-01-01 10:00", "2026-01-01 11:00"),
    "months": ("2026-01", "2026-02"),
    "times_of_day": ("10:00:00", "11:00:00"),
    "named_zone": ("2026-01-01 10:00:00 UTC", "2026-01-01"),
    "bad_month": ("2026-13-01", "2026-01-01"),
    "dangling_t": ("2026-01-01T", "2026-01-01"),
    "thousands": ("1,000", "2"),
    "underscores": ("1_000", "1"),
    "hex": ("0x10", "1"),
    "lowercase_nan": ("nan", "1"),
    "ints_and_booleans": ("1", "true"),
    "dates_and_ints": ("2026-01-01", "10"),
    "words": ("yes", "no"),
    "nulls": ("", ""),
}
JSON_LINES = [
    {"z": 1, "a": 1.5, "big": 12345678901234567890, "when": "2026-01-01", "o": {"y": 1, "x": "a"}},
    {"z": 2, "a": 2, "o": {"y": 2.5}, "list": [], "n": None, "m": 1, "t": True},
    {"list": [1, 2], "m": "x", "nested": [{"k": 1}, {"k": None, "j": "s"}]},
]


def test_csv_columns_carry_the_types_the_run_reads(spark, tmp_path):
    path = tmp_path / "cases.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_CASES)
        writer.writerow([first for first, _ in CSV_CASES.values()])
        writer.writerow([second for _, second in CSV_CASES.values()])

    shown = {c.name: c.type for c in file_dataset(str(path), "cases.csv", "csv").columns}
    inferred = spark.read.option("header", "true").option("inferSchema", "true").csv(str(path))
    read = _widened(inferred.schema)  # the run reads the files again with integers widened
    assert shown == {f.name: f.dataType.simpleString() for f in read.fields}
    assert shown["small_ints"] == "bigint" and shown["dates"] == "date" and shown["minutes"] == "timestamp"


def test_json_lines_columns_carry_the_types_the_run_reads(spark, tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in JSON_LINES) + "\n\n")

    shown = [(c.name, c.type) for c in file_dataset(str(path), "e.jsonl", "json").columns]
    read = spark.read.json(str(path))
    assert shown == [(f.name, f.dataType.simpleString()) for f in read.schema.fields]
    assert ("o", "struct<x:string,y:double>") in shown and ("list", "array<bigint>") in shown

    path.write_text(json.dumps({"id": 1}) + "\nnot json\n")
    shown = [(c.name, c.type) for c in file_dataset(str(path), "e.jsonl", "json").columns]
    assert shown == [(f.name, f.dataType.simpleString()) for f in spark.read.json(str(path)).schema.fields]
    assert shown == [("_corrupt_record", "string"), ("id", "bigint")]


def test_a_big_file_is_typed_from_its_first_rows_in_a_moment(tmp_path):
    path = tmp_path / "big.csv"
    with open(path, "w") as handle:
        handle.write("id,amount\n")
        handle.writelines(f"{index},{index}.5\n" for index in range(300_000))
        handle.write("late,text\n")  # beyond the sample: the note says what was read
    started = time.monotonic()
    dataset = file_dataset(str(path), "big.csv", "csv")
    assert time.monotonic() - started < 1
    assert [(c.name, c.type) for c in dataset.columns] == [("id", "bigint"), ("amount", "double")]
    assert dataset.note == f"CSV, types from the first {sniffing.SAMPLE_ROWS} row(s)"
