"""SQL dialects of the JDBC databases Flowport reads and writes: PostgreSQL, MySQL/MariaDB, SQLite.

The JDBC source and writer build a little SQL of their own (watermark bounds as text, a schema probe,
staging tables); what differs between databases lives here, so the source speaks to each in its own
words: identifier quoting, a cast to text (watermarks are carried as the database prints them),
a row limit, the types Spark should read columns as and write them with, the JDBC driver class and
the Debian package jar that holds it (``scripts/install-system-deps.sh`` installs them; the session
ships every one that exists to the executors, :func:`portal.pipeline.spark.session.spark_jars`).

A data node may name its driver class (``driver``); the dialect gives the default. MariaDB's own
``jdbc:mariadb://`` URLs are read and written as ``jdbc:mysql://`` (the MariaDB driver takes both), so
that Spark applies its MySQL dialect (backtick quoting, MySQL types) rather than its generic one.

:func:`root_cause` keeps what a JDBC failure was really about ("java.lang.ClassNotFoundException:
org.mariadb.jdbc.Driver") instead of Py4J's "An error occurred while calling o3942.load.".
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from pyspark.sql import types as T

from portal.pipeline.errors import ConfigError

JAR_DIR = "/usr/share/java"


@dataclass(frozen=True)
class Dialect:
    name: str
    schemes: tuple[str, ...]  # URL prefixes after "jdbc:"
    driver: str  # default JDBC driver class
    jar: str  # the Debian package's jar (libpostgresql-jdbc-java, libmariadb-java, ...)
    quote_char: str
    text_type: str  # CAST(... AS <text_type>)
    # Spark types this database's columns are better read as (``customSchema``), by Spark type name:
    # SQLite's driver reports INTEGER, which Spark reads as a 32-bit int (5000000000 would wrap).
    read_as: dict[str, str] = field(default_factory=dict)
    # Column types for tables the writer creates, by Spark type name.
    write_as: dict[str, str] = field(default_factory=dict)
    own_ddl: bool = False  # the writer creates its tables itself, in ``write_as`` types
    # Float values a column of this database cannot hold (MariaDB refuses NaN and ±Infinity; SQLite
    # stores a NaN as NULL, silently): a run writing one fails naming the column.
    refused_floats: tuple[str, ...] = ()
    # A text column of this database cannot hold the NUL character (PostgreSQL): a run writing
    # one fails naming the column, where the server would say only "invalid byte sequence".
    refuses_nul_text: bool = False
    label: str = ""  # the database's name in a message

    def quote(self, identifier: str) -> str:
        """``schema.table`` -> ``"schema"."table"`` (`` `schema`.`table` `` in MySQL); quotes already
        written are kept (``"Mixed Case"``)."""
        q = self.quote_char
        parts = []
        for part in identifier.split("."):
            bare = part.strip().strip('"`')
            if not bare:
                raise ConfigError(f"'{identifier}' is not a valid SQL identifier")
            parts.append(q + bare.replace(q, q + q) + q)
        return ".".join(parts)

    def literal(self, value: str) -> str:
        """A string literal; MySQL also treats a backslash as an escape."""
        text = value.replace("'", "''")
        if self.name == "mysql":
            text = text.replace("\\", "\\\\")
        return f"'{text}'"

    def cast_text(self, expression: str) -> str:
        return f"CAST({expression} AS {self.text_type})"

    def limit(self, query: str, rows: int) -> str:
        """``query`` returning at most ``rows`` rows (LIMIT in all three)."""
        return f"{query} LIMIT {int(rows)}"

    def column_type(self, dtype: T.DataType) -> str | None:
        """The column type the writer creates for ``dtype`` (None: the dialect has none for it)."""
        kind = self.write_as.get(dtype.typeName())
        if kind and isinstance(dtype, T.DecimalType):
            return kind.format(precision=dtype.precision, scale=dtype.scale)
        return kind

    def move_rows(
        self, target: str, staging: str, columns: list[str], keys: list[str], order: str | None = None
    ) -> str:
        """``INSERT INTO target SELECT ... FROM staging``; with ``keys`` an upsert on them (the target
        has a unique index on the keys), the row latest by ``order`` winning within the staging table.

        PostgreSQL rewrites a stored row only when the run's row differs from it (``*<>``, the
        binary comparison of the whole rows, which needs no equality operator: json, point...): an
        update writes a new row version and index entry, so a run that reads rows again unchanged
        (a re-run, a backfill, a source delivering at least once) costs about half. MySQL/MariaDB
        skip identical rows themselves."""
        q = self.quote
        names = ", ".join(q(c) for c in columns)
        head = f"INSERT INTO {q(target)} ({names}) SELECT {names} FROM {q(staging)}"  # noqa: S608
        if not keys:
            return head
        key_list = ", ".join(q(k) for k in keys)
        others = [c for c in columns if c not in keys]
        if self.name == "postgresql":  # one row per key: ON CONFLICT may not touch a row twice
            latest = f", {q(order)} DESC" if order else ""
            select = f"SELECT DISTINCT ON ({key_list}) {names} FROM {q(staging)} ORDER BY {key_list}{latest}"  # noqa: S608
            update = ", ".join(f"{q(c)} = EXCLUDED.{q(c)}" for c in others)
            action = f"DO UPDATE SET {update} WHERE fp_t.* *<> EXCLUDED.*" if others else "DO NOTHING"
            return f"INSERT INTO {q(target)} AS fp_t ({names}) {select} ON CONFLICT ({key_list}) {action}"
        ordered = f"{head} WHERE 1=1" + (f" ORDER BY {q(order)}" if order else "")  # later rows win
        if self.name == "mysql":
            update = ", ".join(f"{q(c)} = VALUES({q(c)})" for c in others or keys[:1])
            return f"{ordered} ON DUPLICATE KEY UPDATE {update}"
        update = ", ".join(f"{q(c)} = excluded.{q(c)}" for c in others)
        return f"{ordered} ON CONFLICT ({key_list}) " + (
            f"DO UPDATE SET {update}" if others else "DO NOTHING"
        )

    def unique_index(self, table: str, keys: list[str]) -> str:
        """The unique index an upsert's target needs on its keys."""
        name = self.quote(f"{table.rpartition('.')[2]}_fp_key")
        return f"CREATE UNIQUE INDEX {name} ON {self.quote(table)} ({', '.join(self.quote(k) for k in keys)})"

    def spark_url(self, url: str) -> str:
        """The URL Spark's JDBC data source is given (``jdbc:mariadb:`` -> ``jdbc:mysql:``)."""
        if url.startswith("jdbc:mariadb:"):
            return "jdbc:mysql:" + url[len("jdbc:mariadb:") :]
        return url


POSTGRESQL = Dialect(
    name="postgresql",
    schemes=("postgresql:",),
    driver="org.postgresql.Driver",
    jar=os.environ.get("POSTGRES_JDBC_JAR", f"{JAR_DIR}/postgresql.jar"),
    quote_char='"',
    text_type="text",
    refuses_nul_text=True,
    label="PostgreSQL",
)
MYSQL = Dialect(
    name="mysql",
    schemes=("mysql:", "mariadb:"),
    driver="org.mariadb.jdbc.Driver",
    jar=os.environ.get("MARIADB_JDBC_JAR", f"{JAR_DIR}/mariadb-java-client.jar"),
    quote_char="`",
    text_type="CHAR",
    # Spark's own MySQL types but where they lose values: its TIMESTAMP spans 1970-2038 and, like
    # its DATETIME, drops microseconds; its BLOB holds 64 KiB. An instant lands as its UTC time.
    write_as={
        "string": "LONGTEXT",
        "long": "BIGINT",
        "integer": "INT",
        "short": "SMALLINT",
        "byte": "TINYINT",
        "boolean": "BOOLEAN",
        "double": "DOUBLE",
        "float": "FLOAT",
        "decimal": "DECIMAL({precision},{scale})",
        "timestamp": "DATETIME(6)",
        "timestamp_ntz": "DATETIME(6)",
        "date": "DATE",
        "binary": "LONGBLOB",
    },
    own_ddl=True,
    refused_floats=("NaN", "Infinity", "-Infinity"),
    label="MariaDB/MySQL",
)
SQLITE = Dialect(
    name="sqlite",
    schemes=("sqlite:",),
    driver="org.sqlite.JDBC",
    jar=os.environ.get("SQLITE_JDBC_JAR", f"{JAR_DIR}/sqlite-jdbc.jar"),
    quote_char='"',
    text_type="TEXT",
    # SQLite's INTEGER is 64-bit whatever the declared type says; the driver reports INTEGER.
    read_as={"integer": "BIGINT", "short": "BIGINT", "byte": "BIGINT"},
    write_as={
        "string": "TEXT",
        "long": "INTEGER",
        "integer": "INTEGER",
        "short": "INTEGER",
        "byte": "INTEGER",
        "boolean": "INTEGER",
        "double": "REAL",
        "float": "REAL",
        "decimal": "NUMERIC",
        "timestamp": "TEXT",
        "timestamp_ntz": "TEXT",
        "date": "TEXT",
        "binary": "BLOB",
    },
    own_ddl=True,
    refused_floats=("NaN",),
    label="SQLite",
)
DIALECTS = (POSTGRESQL, MYSQL, SQLITE)


def dialect_for(url: str, key: str = "source.jdbc.url") -> Dialect:
    """The dialect of a ``jdbc:<scheme>...`` URL; a clear error naming the key for any other."""
    rest = url[len("jdbc:") :] if url.startswith("jdbc:") else ""
    for dialect in DIALECTS:
        if rest.startswith(dialect.schemes):
            return dialect
    scheme = (rest.split(":", 1)[0] or url.split("?")[0])[:40]
    supported = ", ".join(f"jdbc:{s}" for d in DIALECTS for s in d.schemes)
    raise ConfigError(f"{key}: no SQL dialect for '{scheme}' (supported: {supported})")


def driver_jars() -> list[str]:
    """The dialects' driver jars that exist on this machine (shipped with every Spark session)."""
    return [d.jar for d in DIALECTS if os.path.exists(d.jar)]


_JAVA_ERROR = re.compile(r"^\s*(?:Caused by: )?([a-z][\w$]*(?:\.[\w$]+)+(?:Exception|Error)\b.*)$", re.M)


def root_cause(error: BaseException) -> str:
    """The innermost Java exception of a Py4J/Spark error as ``class: message`` (else ``str(error)``'s
    first line)."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        try:
            cause = java
            while cause.getCause() is not None and cause.getCause() != cause:
                cause = cause.getCause()
            return str(cause.toString()).strip()
        except Exception:  # noqa: S110 - fall back to the text below
            pass
    text = str(error).strip()
    found = _JAVA_ERROR.findall(text)
    if found:
        return str(found[-1]).strip()
    return text.splitlines()[0] if text else type(error).__name__
