"""Every MariaDB column type arrives through change data capture as the server holds it: integers
signed and unsigned at their limits, DECIMAL at its precision's edge, FLOAT/DOUBLE at their finite
edges, DECIMAL(65,30) as its text (past Spark's 38 digits), text with every awkward character, dates from the year 1000 to 9999, TIME beyond a day and
negative, DATETIME/TIMESTAMP with microseconds, YEAR, ENUM, SET (empty too), JSON and UUID. Read by
the snapshot (in key chunks, and whole for a table without a key) and from the binlog (inserts, an
update, a delete), into a Parquet change log and merged into PostgreSQL, each value read back equals
what MariaDB returns for the source row (README "Types"). A zero date, which no date type holds,
fails the run naming its column."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pymysql
import pytest

from tests.builders.props import change_log_merged_into
from tests.builders.servers import MYSQL_HOST, MYSQL_PORT
from tests.mariadb_binlog import binlog_mariadb, own_schema  # noqa: F401 (fixture)

from ..helpers import data_files, run_and_publish, spec

CDC = "portal.pipeline.sources.cdc.CdcSource"
COLUMNS = {  # name: MariaDB type
    "ti": "tinyint", "tiu": "tinyint unsigned", "si": "smallint", "siu": "smallint unsigned",
    "mi": "mediumint", "miu": "mediumint unsigned", "i": "int", "iu": "int unsigned",
    "bi": "bigint", "biu": "bigint unsigned", "d12": "decimal(12,2)", "d38": "decimal(38,10)",
    "d65": "decimal(65,30)",
    "f": "float", "db": "double", "c": "char(10)", "vc": "varchar(100)", "tx": "text",
    "mt": "mediumtext", "flag": "boolean", "dd": "date", "tm": "time(6)", "dtm": "datetime(6)",
    "ts": "timestamp(6) NULL DEFAULT NULL", "yr": "year", "en": "enum('a','b c','x''y')",
    "st": "set('r','g','b')", "js": "json", "uu": "uuid",
}  # fmt: skip
NINES = "9" * 28 + "." + "9" * 10
WIDEST = "9" * 35 + "." + "9" * 30  # MariaDB's widest DECIMAL, past Spark's 38 digits
FLT_MAX, FLT_MIN = 3.4028234663852886e38, 1.1754943508222875e-38
LOW = {
    "ti": -128, "tiu": 0, "si": -32768, "siu": 0, "mi": -8388608, "miu": 0, "i": -(2**31), "iu": 0,
    "bi": -(2**63), "biu": 0, "d12": "-9999999999.99", "d38": "-" + NINES, "d65": "-" + WIDEST, "f": -FLT_MAX,
    "db": -1.7976931348623157e308, "c": "it's", "vc": "quote \" and ' and \\ back\\slash",
    "tx": "line\nbreak\ttab\r\nend", "mt": "🙂 中文 é", "flag": 0, "dd": "1000-01-01",
    "tm": "-838:59:59", "dtm": "1000-01-01 00:00:00", "ts": "1970-01-01 00:00:01", "yr": 1901,
    "en": "a", "st": "", "js": '{"b": 1,  "a": [1, 2.50, "x"]}',
    "uu": "00000000-0000-0000-0000-000000000000",
}  # fmt: skip
HIGH = {
    "ti": 127, "tiu": 255, "si": 32767, "siu": 65535, "mi": 8388607, "miu": 16777215,
    "i": 2**31 - 1, "iu": 2**32 - 1, "bi": 2**63 - 1, "biu": 2**64 - 1, "d12": "9999999999.99",
    "d38": NINES, "d65": WIDEST, "f": FLT_MAX, "db": 1.7976931348623157e308, "c": "NULL", "vc": "\\N", "tx": "",
    "mt": "", "flag": 1, "dd": "9999-12-31", "tm": "838:59:59.999999",
    "dtm": "9999-12-31 23:59:59.999999", "ts": "2038-01-19 03:14:07.999999", "yr": 2155,
    "en": "x'y", "st": "r,g,b", "js": "[]", "uu": "ffffffff-ffff-ffff-ffff-ffffffffffff",
}  # fmt: skip
SMALL = {
    "ti": -1, "tiu": 1, "si": 0, "siu": 1, "mi": -1, "miu": 1, "i": 0, "iu": 2**31,
    "bi": -1, "biu": 2**63, "d12": "-0.01", "d38": "0.0000000001", "d65": "0", "f": FLT_MIN,
    "db": 2.2250738585072014e-308, "c": " lead", "vc": "tab\there", "tx": "中文\\n",
    "mt": "\\0 is no NUL", "flag": 2, "dd": "1969-12-31", "tm": "-00:00:00.000001",
    "dtm": "1969-12-31 23:59:59.999999", "ts": "2000-02-29 12:00:00.5", "yr": 2000,
    "en": "b c", "st": "g", "js": '"\\u00e9"', "uu": "123e4567-e89b-12d3-a456-426614174000",
}  # fmt: skip
LATE = {
    **SMALL, "f": 0.5, "db": -0.0, "tm": "-100:00:00.5", "yr": 0, "dd": "2040-02-29",
    "dtm": "2040-02-29 23:59:59.000001", "ts": "2037-12-31 23:59:59.123456", "st": "r,b",
}  # fmt: skip
# What README "Types" says a column becomes: (Parquet, PostgreSQL).
KINDS = {
    "tiu": ("int32", "integer"), "iu": ("int64", "bigint"), "biu": ("decimal128(20, 0)", "numeric"),
    "d38": ("decimal128(38, 10)", "numeric"), "d65": ("string", "text"), "f": ("float", "real"),
    "flag": ("int32", "integer"),
    "tm": ("string", "text"), "dtm": ("timestamp[us]", "timestamp without time zone"),
    "ts": ("timestamp[us, tz=UTC]", "timestamp with time zone"), "yr": ("int32", "integer"),
    "st": ("string", "text"),
}  # fmt: skip
EMPTY = dict.fromkeys(COLUMNS)  # every column NULL
ROWS = [(1, LOW), (2, HIGH), (3, SMALL), (4, LATE), (5, EMPTY)]


def has_uuid(conn: Any) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = str(cur.fetchone()[0]).split("-")[0]
    return tuple(int(x) for x in version.split(".")[:2]) >= (10, 7)  # MariaDB's UUID type


@pytest.fixture
def store(binlog_mariadb: dict[str, Any]) -> Iterator[dict[str, Any]]:  # noqa: F811
    with own_schema(binlog_mariadb) as found:
        names = [n for n in COLUMNS if n != "uu" or has_uuid(found["conn"])]
        table = ", ".join(f"`{n}` {COLUMNS[n]}" for n in names)
        with found["conn"].cursor() as cur:
            # The server's own zone is not UTC: a TIMESTAMP is an instant whatever a session reads it in.
            cur.execute("SET GLOBAL time_zone = '+05:00'")
            cur.execute("SET SESSION time_zone = '+00:00'")
            for name, key in (("vals", "PRIMARY KEY"), ("val_log", "NOT NULL")):
                cur.execute(
                    f"CREATE TABLE `{found['name']}`.{name} (id int {key}, {table}) CHARACTER SET utf8mb4"
                )
        found["columns"] = names
        insert(found, ROWS)
        try:
            yield found
        finally:
            with found["conn"].cursor() as cur:
                cur.execute("SET GLOBAL time_zone = 'SYSTEM'")


def insert(store: dict[str, Any], rows: list[tuple[int, dict[str, Any]]], offset: int = 0) -> None:
    names = store["columns"]
    with store["conn"].cursor() as cur:
        for table in ("vals", "val_log"):
            cur.executemany(
                f"INSERT INTO `{store['name']}`.{table} (id, {', '.join(names)})"  # noqa: S608
                f" VALUES (%s{', %s' * len(names)})",
                [(key + offset, *(row[n] for n in names)) for key, row in rows],
            )


def source_rows(store: dict[str, Any], table: str) -> dict[int, dict[str, Any]]:
    """The rows as MariaDB returns them (in UTC), in the form README "Types" says each arrives:
    TIME as the server's text, TIMESTAMP as a UTC instant, BIGINT UNSIGNED as a decimal, FLOAT as
    its 32 bits (the server's text of a FLOAT keeps 6 digits, which do not give them back)."""
    return mariadb_rows(store["conn"], f"`{store['name']}`.{table}", store["columns"])


def mariadb_rows(conn: Any, table: str, names: list[str]) -> dict[int, dict[str, Any]]:
    read = {"tm": "CAST(tm AS CHAR)", "f": "CAST(f AS DOUBLE)"}
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"SELECT id, {', '.join(read.get(n, n) for n in names)} FROM {table}")  # noqa: S608
        found = {r[0]: dict(zip(names, r[1:], strict=True)) for r in cur.fetchall()}
    for row in found.values():
        if row["ts"] is not None:
            row["ts"] = row["ts"].replace(tzinfo=dt.UTC)
        if row["biu"] is not None:
            row["biu"] = Decimal(row["biu"])
        if isinstance(row["d65"], Decimal):  # past Spark's decimals: its text, every digit
            row["d65"] = format(row["d65"], "f")
    return found


def differences(arrived: dict[int, dict[str, Any]], expected: dict[int, dict[str, Any]]) -> list[str]:
    """``(id, column): arrived != expected`` for every value that differs."""
    assert sorted(arrived) == sorted(expected)
    found = []
    for key, row in expected.items():
        for name, value in row.items():
            got = arrived[key][name]
            if name == "f" and value is not None and got is not None:  # a FLOAT is 32 bits
                same = np.float32(got) == np.float32(value)
            else:
                same = type(got) is type(value) and got == value
            if not same:
                found.append(f"({key}, {name}): {got!r} != {value!r}")
    return found


def replayed(folder: Path, names: list[str]) -> dict[int, dict[str, Any]]:
    """The change log in Parquet replayed by key."""
    log = pa.concat_tables([pq.read_table(p) for p in data_files(folder)]).to_pylist()
    table: dict[int, dict[str, Any]] = {}
    for row in sorted(log, key=lambda r: r["_cdc_position"]):
        if row["_cdc_op"] == "d":
            table.pop(row["id"], None)
        else:
            table[row["id"]] = {n: row[n] for n in names}
    return table


def change(store: dict[str, Any]) -> None:
    """After the first run: the rows again, from the binlog, an update to the lowest values and a delete."""
    insert(store, ROWS, offset=100)
    names = store["columns"]
    with store["conn"].cursor() as cur:
        for table in ("vals", "val_log"):
            cur.execute(
                f"UPDATE `{store['name']}`.{table} SET {', '.join(f'{n} = %s' for n in names)}"  # noqa: S608
                " WHERE id IN (3, 105)",
                [LOW[n] for n in names],
            )
            cur.execute(f"DELETE FROM `{store['name']}`.{table} WHERE id IN (4, 101)")  # noqa: S608


def test_every_mariadb_type_arrives_as_the_server_holds_it(
    spark, store, tmp_path: Path, pg, pg_database, mysql_database
):
    db, names = store["name"], store["columns"]
    files = spec(
        tmp_path / "files",
        {
            "source.class": CDC,
            "source.jdbc.url": store["url"],
            "source.conn.username": "root",
            "source.cdc.tables": f"{db}.vals,{db}.val_log",
            "source.cdc.snapshot.chunk.size": "2",  # several key chunks
            "writer.output.format": "parquet",
            "data.publisher.final.dir": str(tmp_path / "out"),
        },
        flow_id=51,
    )
    target = f"cdc_vals_{uuid.uuid4().hex[:6]}"
    merged = spec(
        tmp_path / "merged",
        {
            "source.class": CDC,
            "source.jdbc.url": store["url"],
            "source.conn.username": "root",
            "source.cdc.tables": f"{db}.vals",
            **change_log_merged_into(pg_database["url"], pg_database["user"], target),
        },
        flow_id=52,
        job_name="merged",
    )
    into_mariadb = spec(
        tmp_path / "into_mariadb",
        {
            **merged["properties"],
            "writer.jdbc.url": mysql_database["url"],
            "writer.jdbc.username": mysql_database["user"],
        },
        flow_id=53,
        job_name="into_mariadb",
    )
    marks: dict[str, dict[str, str]] = {"files": {}, "merged": {}, "into_mariadb": {}}
    for execution in (1, 2):
        for name, job in (("files", files), ("merged", merged), ("into_mariadb", into_mariadb)):
            job["execution_id"] = 500 + execution
            states = run_and_publish(spark, job, marks[name])
            assert [s.get("error") for s in states] == [None] * len(states), states
        if execution == 1:
            change(store)

    schema = pq.read_schema(data_files(tmp_path / "out" / f"{db}.vals")[0])
    assert {n: str(schema.field(n).type) for n in KINDS} == {n: k[0] for n, k in KINDS.items()}
    for table in ("vals", "val_log"):
        expected = source_rows(store, table)
        assert len(expected) == 2 * len(ROWS) - 2
        assert np.float32(expected[2]["f"]) == np.float32(FLT_MAX)  # the server holds the 32 bits
        wrong = differences(replayed(tmp_path / "out" / f"{db}.{table}", names), expected)
        assert not wrong, "\n".join([table, *wrong])

    with pg.cursor() as cur:
        cur.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s", (target,)
        )
        assert {n: k for n, k in cur.fetchall() if n in KINDS} == {n: k[1] for n, k in KINDS.items()}
        cur.execute("SET TIME ZONE 'UTC'")
        cur.execute(f"SELECT id, {', '.join(names)} FROM {target}")  # noqa: S608
        copied = {r[0]: dict(zip(names, r[1:], strict=True)) for r in cur.fetchall()}
    wrong = differences(copied, source_rows(store, "vals"))
    assert not wrong, "\n".join(["postgresql", *wrong])

    mariadb = pymysql.connect(
        host=MYSQL_HOST, port=MYSQL_PORT, user="root", password="", database=mysql_database["db"]
    )
    with mariadb:
        wrong = differences(mariadb_rows(mariadb, f"`{target}`", names), source_rows(store, "vals"))
    assert not wrong, "\n".join(["mariadb", *wrong])


def test_a_zero_date_is_refused_naming_its_column_by_the_snapshot_and_the_binlog(
    spark,
    binlog_mariadb: dict[str, Any],  # noqa: F811
    tmp_path: Path,
):
    """A server without NO_ZERO_DATE takes ``0000-00-00``: no date type holds it, and the binlog
    library would give NULL (or for a TIMESTAMP the epoch), so the run fails saying where it is."""
    with own_schema(
        binlog_mariadb,
        "CREATE TABLE {db}.dates (id int PRIMARY KEY, dd date, ts timestamp NULL DEFAULT NULL)",
    ) as store:
        table = f"{store['name']}.dates"
        with store["conn"].cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute(f"INSERT INTO {table} VALUES (1, '2024-02-29', '2024-02-29 12:00:00')")  # noqa: S608

            def job(flow: int) -> dict[str, Any]:
                props = {
                    "source.class": CDC,
                    "source.jdbc.url": store["url"],
                    "source.conn.username": "root",
                    "source.cdc.tables": table,
                    "writer.output.format": "parquet",
                    "data.publisher.final.dir": str(tmp_path / f"out{flow}"),
                }
                return spec(tmp_path / f"flow{flow}", props, flow_id=flow)

            def errors(job: dict[str, Any], marks: dict[str, str]) -> list[Any]:
                job["execution_id"] += 1
                return [s.get("error") for s in run_and_publish(spark, job, marks)]

            from_binlog, marks = job(61), {}
            assert errors(from_binlog, marks) == [None]
            cur.execute(f"INSERT INTO {table} VALUES (2, '0000-00-00', '2024-03-01 00:00:00')")  # noqa: S608
            cur.execute(f"INSERT INTO {table} VALUES (3, '2024-03-01', '0000-00-00 00:00:00')")  # noqa: S608
            refused = errors(from_binlog, marks)
            assert len(refused) == 1 and f"{table}: column 'dd' holds the zero date" in str(refused[0])

            cur.execute(f"DELETE FROM {table} WHERE id = 2")  # noqa: S608
            refused = errors(job(62), {})  # a snapshot meets the zero TIMESTAMP
            assert len(refused) == 1 and f"{table}: column 'ts' holds the zero date" in str(refused[0])
