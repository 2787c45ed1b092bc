"""What a JDBC read asks Spark to read each column as: decided from the driver's own type names
(Spark 4's ``jdbcClientType``), and never against what an earlier run recorded for the dataset."""

from __future__ import annotations

from pyspark.sql import types as T

from portal.pipeline.dialects import MYSQL, POSTGRESQL
from portal.pipeline.sources.jdbc_types import reading


def field(name: str, dtype: T.DataType, client: str, scale: int = 0) -> T.StructField:
    return T.StructField(name, dtype, True, {"jdbcClientType": client, "scale": scale})


PG_TABLE = T.StructType(
    [
        field("id", T.IntegerType(), "int4"),
        field("at", T.TimestampType(), "timestamp", 6),
        field("at_zone", T.TimestampType(), "timestamptz", 6),
        field("lasted", T.TimestampType(), "time", 6),
        field("doc", T.StringType(), "jsonb"),
        field("amount", T.DecimalType(38, 18), "numeric"),
        field("price", T.DecimalType(12, 2), "numeric", 2),
    ]
)


def test_a_postgresql_table_is_read_as_its_values_are():
    read = reading(PG_TABLE, POSTGRESQL)
    assert read.custom_schema == "`at` STRING, `at_zone` STRING, `lasted` STRING, `amount` STRING"
    assert read.kept == {"lasted": "time", "doc": "jsonb", "amount": "numeric"}
    # time stamps printed by the server and cast back in Spark's calendar: a wall time stays one,
    # an instant is printed in UTC
    assert read.casts == {"at": "timestamp_ntz", "at_zone": "timestamp"}
    assert read.texts == {
        "at": 'CAST("at" AS text) AS "at"',
        "at_zone": "CAST(\"at_zone\" AT TIME ZONE 'UTC' AS text) || 'Z' AS \"at_zone\"",
    }


def test_the_printed_columns_replace_theirs_in_what_spark_reads():
    read = reading(PG_TABLE, POSTGRESQL)
    query = read.query("(SELECT t.* FROM s t) AS fp_wu", PG_TABLE.fieldNames(), POSTGRESQL)
    assert query == (
        """(SELECT "id", CAST("at" AS text) AS "at", CAST("at_zone" AT TIME ZONE 'UTC' AS text) || 'Z' AS "at_zone","""
        ' "lasted", "doc", "amount", "price" FROM (SELECT t.* FROM s t) AS fp_wu) AS fp_text'
    )
    assert reading(T.StructType([PG_TABLE["id"]]), POSTGRESQL).query("q", ["id"], POSTGRESQL) == "q"


def test_a_column_the_flow_compares_on_keeps_its_number_type():
    read = reading(PG_TABLE, POSTGRESQL, compared={"amount"})
    assert read.custom_schema == "`at` STRING, `at_zone` STRING, `lasted` STRING"
    assert "amount" not in read.kept


def test_a_dataset_recorded_in_sparks_own_mapping_keeps_it():
    """Its earlier files and tables hold those types, and a schema policy would see a change; a
    time stamp read as the server's text keeps the recorded instant (a wall time: in the JVM's
    zone, as Spark's own mapping read it), in the servers' calendar."""
    recorded = T.StructType([T.StructField(f.name, f.dataType) for f in PG_TABLE.fields if f.name != "doc"])
    read = reading(PG_TABLE, POSTGRESQL, recorded=recorded, zone="Europe/Paris")
    assert read.custom_schema == "`at` STRING, `at_zone` STRING"
    assert read.casts == {"at": "timestamp", "at_zone": "timestamp"}
    assert read.zoned == {"at": "Europe/Paris"}
    assert read.kept == {"doc": "jsonb"}  # its Spark type is text either way; `lasted` stays a 1970 time


def test_mariadb_datetime_is_a_wall_time_its_timestamp_an_instant():
    table = T.StructType(
        [
            field("at", T.TimestampType(), "DATETIME", 6),
            field("stamped", T.TimestampType(), "TIMESTAMP", 6),
            field("lasted", T.TimestampType(), "TIME", 6),
        ]
    )
    read = reading(table, MYSQL)
    # the wall time read as the server's text and cast back in Spark's (proleptic Gregorian)
    # calendar: the driver's Julian one would move a date before 1582
    assert read.custom_schema == "`at` STRING, `lasted` STRING"
    assert read.casts == {"at": "timestamp_ntz"}
    assert read.texts == {"at": "CAST(`at` AS CHAR) AS `at`"}
    assert read.kept == {}  # a MariaDB TIME is not PostgreSQL's: its text only


def test_a_decimal_wider_than_sparks_38_digits_is_read_as_its_text():
    """Spark reads a numeric(50,10) as decimal(38,0), its fraction cut; the column's scale (10)
    says so. A numeric(38,10) that Spark reads right keeps its type."""
    table = T.StructType(
        [
            field("wide", T.DecimalType(38, 0), "numeric", 10),
            field("fits", T.DecimalType(38, 10), "numeric", 10),
            field("maria", T.DecimalType(38, 3), "decimal", 30),
        ]
    )
    assert reading(table, POSTGRESQL).custom_schema == "`wide` STRING, `maria` STRING"
    assert reading(table, POSTGRESQL).kept == {"wide": "numeric"}
    assert reading(table, MYSQL).custom_schema == "`wide` STRING, `maria` STRING"
