"""The columns of a CSV or JSON-lines file typed as a run will read them: Spark's own inference
rules (`inferSchema`, CSV integers widened to bigint as the files source does), from a bounded
sample (the first `SAMPLE_ROWS` rows, at most `SAMPLE_BYTES`), so the picker shows what a run
will read in a moment, whatever the file's size."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from typing import Any

from portal.pipeline.discovery.shapes import Column

SAMPLE_ROWS = 1000  # CSV / JSON lines: rows read to type the columns
SAMPLE_BYTES = 1 << 20  # ... and at most this much of the file


# CSV tokens as Spark's CSVInferSchema reads them (Spark 4, default options: preferDate, the default
# date and timestamp parsers); checked against Spark itself in the tests.
_CSV_INT = re.compile(r"[+-]?\d+")
_CSV_DECIMAL = re.compile(r"[+-]?(\d+)\.")  # "1." is a decimal of scale 0 (java.math.BigDecimal)
_CSV_DOUBLE = re.compile(
    r"[\x00-\x20]*[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)[\x00-\x20]*"
)
_CSV_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_ZONE = (
    r"(?:Z|[+-]\d{1,2}(?::?\d{2})?|\s*(?:UTC|GMT|UT)(?:[+-]\d{1,2}(?::?\d{2})?)?|\s*[A-Za-z]+/[A-Za-z_]+)?"
)
_CSV_TIMESTAMP = re.compile(
    r"\s*(?:(?P<y>\d{4})-(?P<m>\d{1,2})(?:-(?P<d>\d{1,2}))?"
    r"(?:[ T](?P<h>\d{1,2}):(?P<mi>\d{1,2})(?::(?P<s>\d{1,2})(?:\.\d{0,9})?)?" + _ZONE + r")?"
    r"|T?(?P<th>\d{1,2}):(?P<tmi>\d{1,2}):(?P<ts>\d{1,2})(?:\.\d{0,9})?" + _ZONE + r")\s*"
)
_INT32 = 2**31
_INT64 = 2**63


def _valid_date(year: str | None, month: str | None, day: str | None) -> bool:
    try:
        dt.date(int(year or 1), int(month or 1), int(day or 1))
    except ValueError:
        return False
    return True


def _csv_token_type(token: str) -> str:
    """The type Spark infers for one non-empty CSV value ("int" before widening)."""
    if _CSV_INT.fullmatch(token):
        value = int(token)
        if -_INT32 <= value < _INT32:
            return "int"
        if -_INT64 <= value < _INT64:
            return "bigint"
        digits = len(token.lstrip("+-").lstrip("0") or "0")
        return f"decimal({digits},0)" if digits <= 38 else "double"
    if match := _CSV_DECIMAL.fullmatch(token):
        digits = len(match.group(1).lstrip("0") or "0")
        return f"decimal({digits},0)" if digits <= 38 else "double"
    if _CSV_DOUBLE.fullmatch(token) or token in ("Inf", "-Inf"):
        return "double"
    if (date := _CSV_DATE.fullmatch(token)) and _valid_date(*date.groups()):
        return "date"
    if moment := _CSV_TIMESTAMP.fullmatch(token):
        parts = moment.groupdict()
        hour, minute, second = (
            (parts["h"], parts["mi"], parts["s"])
            if parts["th"] is None
            else (parts["th"], parts["tmi"], parts["ts"])
        )
        if _valid_date(parts["y"], parts["m"], parts["d"]) and (
            int(hour or 0) < 24 and int(minute or 0) < 60 and int(second or 0) < 60
        ):
            return "timestamp"
    if token.lower() in ("true", "false"):
        return "boolean"
    return "string"


_NUMERIC_RANK = {"int": 0, "bigint": 1}


def _decimal_digits(kind: str) -> int | None:
    if kind.startswith("decimal("):
        return int(kind[len("decimal(") :].split(",")[0])
    return {"int": 10, "bigint": 20}.get(kind)


def _wider(first: str | None, second: str) -> str:
    """Spark's compatible type of two inferred types (CSV and JSON alike), `string` if none."""
    if first is None or first == second:
        return second
    pair = {first, second}
    if pair <= {"int", "bigint"}:
        return "bigint"
    if "double" in pair and all(kind == "double" or _decimal_digits(kind) is not None for kind in pair):
        return "double"
    if all(_decimal_digits(kind) is not None for kind in pair):
        digits = max(_decimal_digits(kind) or 0 for kind in pair)
        return f"decimal({digits},0)" if digits <= 38 else "double"
    if pair == {"date", "timestamp"}:
        return "timestamp"
    return "string"


def _sample(path: str) -> str:
    with open(path, "rb") as handle:
        data = handle.read(SAMPLE_BYTES)
    if len(data) == SAMPLE_BYTES and b"\n" in data:
        data = data[: data.rindex(b"\n") + 1]  # whole lines only
    return data.decode("utf-8", errors="replace")


def csv_columns(path: str) -> tuple[list[Column], int]:
    rows = csv.reader(io.StringIO(_sample(path), newline=""))
    header = next(rows, [])
    types: list[str | None] = [None] * len(header)
    read = 0
    for row in rows:
        if read >= SAMPLE_ROWS:
            break
        read += 1
        for index, token in enumerate(row[: len(header)]):
            if token:  # empty is null: it does not decide a type
                types[index] = _wider(types[index], _csv_token_type(token))
    names = [name or f"_c{index}" for index, name in enumerate(header)]
    typed = ["bigint" if kind == "int" else kind or "string" for kind in types]  # files._widened
    return [Column(name, kind) for name, kind in zip(names, typed, strict=True)], read


# A JSON type while inferring: an atomic name, ("array", element) or ("struct", fields); None is
# null (it does not decide a type; Spark reads a type never decided as string).
_JsonType = str | tuple[str, Any] | None


def _json_type(value: object) -> _JsonType:
    """Spark's JSON inference of one value (prefersDecimal off: fractions are double)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        if -_INT64 <= value < _INT64:
            return "bigint"
        digits = len(str(abs(value)))
        return f"decimal({digits},0)" if digits <= 38 else "double"
    if isinstance(value, float):
        return "double"
    if isinstance(value, dict):
        fields: dict[str, _JsonType] = {}
        for key, item in value.items():
            fields[key] = _json_merge(fields.get(key), _json_type(item))
        return ("struct", fields)
    if isinstance(value, list):
        element: _JsonType = None
        for item in value:
            element = _json_merge(element, _json_type(item))
        return ("array", element)
    return "string"


def _json_merge(first: _JsonType, second: _JsonType) -> _JsonType:
    if first is None or second is None:
        return second if first is None else first
    if isinstance(first, tuple) and isinstance(second, tuple) and first[0] == second[0]:
        if first[0] == "array":
            return ("array", _json_merge(first[1], second[1]))
        fields = dict(first[1])
        for key, item in second[1].items():
            fields[key] = _json_merge(fields.get(key), item)
        return ("struct", fields)
    if isinstance(first, tuple) or isinstance(second, tuple):
        return "string"
    return _wider(first, second)


def _json_name(kind: _JsonType) -> str:
    """Spark's simpleString of the type (struct fields sorted by name, as Spark infers them)."""
    if kind is None:
        return "string"
    if isinstance(kind, str):
        return kind
    if kind[0] == "array":
        return f"array<{_json_name(kind[1])}>"
    return "struct<" + ",".join(f"{key}:{_json_name(kind[1][key])}" for key in sorted(kind[1])) + ">"


def json_columns(path: str) -> tuple[list[Column], int, bool]:
    """Columns of JSON lines, sorted by name as Spark's inference gives them; a line that is not a
    JSON object makes Spark add `_corrupt_record`."""
    merged: dict[str, _JsonType] = {}
    read, corrupt = 0, False
    for line in _sample(path).splitlines():
        if read >= SAMPLE_ROWS:
            break
        if not line.strip():
            continue
        read += 1
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            corrupt = True
            continue
        for key, item in value.items():
            merged[key] = _json_merge(merged.get(key), _json_type(item))
    if corrupt:
        merged.setdefault("_corrupt_record", "string")
    return [Column(key, _json_name(merged[key])) for key in sorted(merged)], read, corrupt
