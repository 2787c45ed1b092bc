"""Every value a JDBC read of a MariaDB table takes arrives in Parquet as it left: integers at their
limits (unsigned ones in a type that holds them), decimals with their precision and scale, floats,
every byte of a BLOB and a VARBINARY, ENUM and SET as their text, JSON as written, dates and wall
times from the year 1000 to 9999 (the server's calendar, not the driver's Julian one) to the
microsecond, an instant in UTC, a TIME beyond 24 hours as its text (README, "Types")."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pymysql

from tests.builders.servers import MYSQL_HOST, MYSQL_PORT

from ..helpers import data_files, run_and_publish, spec

COLUMNS = (
    "id int PRIMARY KEY, ti tinyint, si smallint unsigned, bi bigint unsigned, d decimal(14,4),"
    " f float, db double, b blob, vb varbinary(10), e enum('a','b'), s set('x','y'), j json,"
    " at datetime(6), stamped timestamp(6) NULL, lasted time(6), born date, txt text"
)
ROWS = (
    "(1, -128, 65535, 18446744073709551615, -9999999999.9999, 1.5, -2.5e300, x'00ff80', x'0001',"
    " 'b', 'x,y', '{\"a\": [1, 2.50]}', '1000-01-01 00:00:00.000001', '2001-02-03 04:05:06.7',"
    " '-838:59:59', '1000-01-01', 'é 中文 🙂 \\\\N'),"
    " (2, 127, 0, 0, 0.0001, 0, 0, '', NULL, 'a', '', 'null', '9999-12-31 23:59:59.999999', NULL,"
    " '838:59:59.999999', '9999-12-31', '')"
)


def test_every_value_of_a_mariadb_read_arrives_as_it_left(spark, mysql_database, tmp_path: Path):
    table = f"mv_src_{uuid.uuid4().hex[:6]}"
    conn = pymysql.connect(
        host=MYSQL_HOST,
        port=MYSQL_PORT,
        user="root",
        password="",
        database=mysql_database["db"],
        charset="utf8mb4",
    )
    with conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} ({COLUMNS}) CHARACTER SET utf8mb4")
        cur.execute(f"INSERT INTO {table} VALUES {ROWS}")  # noqa: S608
        conn.commit()
    props = {
        "source.class": "portal.pipeline.sources.jdbc.JdbcSource",
        "source.jdbc.url": mysql_database["url"],
        "source.conn.username": "root",
        "source.jdbc.tables": table,
        "extract.is.full": "true",
        "writer.output.format": "parquet",
        "data.publisher.final.dir": str(tmp_path / "out"),
    }
    states = run_and_publish(spark, spec(tmp_path, props), {})
    assert [s.get("error") for s in states] == [None], states

    copy = pa.concat_tables([pq.read_table(p) for p in data_files(tmp_path / "out" / table)])
    assert copy.schema.field("bi").type == pa.decimal128(20, 0)
    assert copy.schema.field("d").type == pa.decimal128(14, 4)
    assert copy.schema.field("at").type == pa.timestamp("us")
    assert copy.schema.field("born").type == pa.date32()
    got = {r["id"]: r for r in copy.to_pylist()}
    first, second = got[1], got[2]
    assert (first["ti"], first["si"], first["bi"]) == (-128, 65535, Decimal("18446744073709551615"))
    assert (first["d"], first["f"], first["db"]) == (Decimal("-9999999999.9999"), 1.5, -2.5e300)
    assert (first["b"], first["vb"], second["b"], second["vb"]) == (b"\x00\xff\x80", b"\x00\x01", b"", None)
    assert (first["e"], first["s"], second["s"]) == ("b", "x,y", "")
    assert (first["j"], second["j"]) == ('{"a": [1, 2.50]}', "null")
    assert first["at"] == dt.datetime(1000, 1, 1, 0, 0, 0, 1)  # not 1000-01-06 (Julian)
    assert second["at"] == dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    assert (first["born"], second["born"]) == (dt.date(1000, 1, 1), dt.date(9999, 12, 31))
    assert first["stamped"] == dt.datetime(2001, 2, 3, 4, 5, 6, 700000, tzinfo=dt.UTC)
    assert (first["lasted"], second["lasted"]) == ("-838:59:59.000000", "838:59:59.999999")
    assert (first["txt"], second["txt"]) == ("é 中文 🙂 \\N", "")
