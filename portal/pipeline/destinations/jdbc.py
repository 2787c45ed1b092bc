"""The JDBC destination: a branch's rows staged in a table beside the target, published in one transaction.

The writer (``writer.jdbc.url``, ``writer.jdbc.table``, ``writer.jdbc.username``,
``writer.jdbc.password``, ``writer.jdbc.marker.table``) writes the branch into its own staging table
next to the target (:class:`JdbcDataWriter`). ``{table}`` in ``writer.jdbc.table`` gives each dataset
its own target (:mod:`portal.pipeline.destinations.table_templates`). Before anything is read, the
writer opens one connection as Spark's writer will and asks where it landed
(:mod:`portal.pipeline.landing`): the portal's own database is refused, and on MySQL/MariaDB a target
or marker table naming another database than the one it landed in.

Publishing (``jdbc_publish``, :class:`JdbcPublishCommitStep`) appends the rows of the staging
table(s) to the target table and records a marker row keyed by (execution id, job, dataset, branch)
in the marker table, in ONE PostgreSQL transaction, then drops the staging tables in it
(MySQL/MariaDB and SQLite destinations: :mod:`portal.pipeline.destinations.jdbc_targets`).  verify:
the marker exists (with the same target and row count -> True; otherwise CommitConflictError).  The
password is not in the step: ``password_property`` names the job property holding it, and
``from_dict(data, properties)`` resolves it.  The write mode's SQL (``writer.write.mode``: append,
overwrite, merge on ``extract.primary.key.fields``, history) is
:mod:`portal.pipeline.destinations.jdbc_modes`'s; with ``evolve`` (``schema.evolution.policy=evolve``)
the target first takes the staging table's new and wider columns
(:mod:`portal.pipeline.destinations.jdbc_evolution`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping
from typing import Any

from psycopg import sql
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from portal.pipeline import landing, pgconn, usernode
from portal.pipeline.destinations import jdbc_evolution, jdbc_modes, pgtypes, table_templates, write_modes
from portal.pipeline.destinations.base import (
    DataWriter,
    SecretBearingStep,
    WriterContext,
    WriteResult,
    register_step_type,
)
from portal.pipeline.destinations.jdbc_targets import JdbcTarget
from portal.pipeline.dialects import POSTGRESQL, Dialect, dialect_for
from portal.pipeline.errors import CommitConflictError
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.properties import Properties


def staging_prefix(job_name: str, target: str) -> str:
    """How every staging table a job stages for ``target`` begins (``fp_stg_<digest>_``): the
    name then carries the execution (:func:`staged_by`), so leftovers can be found and swept."""
    digest = hashlib.sha1(f"{job_name}/{target}".encode()).hexdigest()[:8]  # noqa: S324 - a name
    return f"fp_stg_{digest}_"


def staging_table_name(target: str, jobspec: JobSpec, task_id: str, branch: int) -> str:
    """A short, unique staging table beside the target (PostgreSQL names are at most 63 bytes):
    ``fp_stg_<job and target>_<execution>_<task and branch>``."""
    schema, _, _table = target.rpartition(".")
    digest = hashlib.sha1(  # noqa: S324 - a name, not a security boundary
        f"{jobspec.job_name}/{jobspec.execution_id}/{task_id}/{branch}/{target}".encode()
    ).hexdigest()[:12]
    name = f"{staging_prefix(jobspec.job_name, target)}{int(jobspec.execution_id)}_{digest}"
    return f"{schema}.{name}" if schema else name


def staged_by(prefix: str, name: str) -> int | None:
    """The execution a staging table named ``name`` (beginning with ``prefix``) was staged by."""
    found = name.removeprefix(prefix).split("_", 1)[0] if name.startswith(prefix) else ""
    return int(found) if found.isdigit() else None


class JdbcDataWriter(DataWriter):
    """Append to a database table through a per-branch staging table."""

    format = "JDBC"

    def __init__(self, props: Properties, ctx: WriterContext) -> None:
        super().__init__(props, ctx)
        self.url = props.require("writer.jdbc.url")
        # ``{table}``: this dataset's own target (portal.pipeline.destinations.table_templates)
        self.table = table_templates.target(props, ctx.dataset_urn)
        self.staging_table = staging_table_name(self.table, ctx.jobspec, ctx.task_id, ctx.branch_index)
        self.error_staging_table: str | None = None  # bad records staged (badtables)
        self.write_mode = write_modes.resolve(props, "JDBC")  # refused here, before any read
        self.what = landing.node_what(ctx.jobspec.extra, "destination", "writer.jdbc.url")
        self._check_landing()

    def _check_landing(self) -> None:
        """Before any read: where the writer's connections land, refused if the portal's own database
        or (MySQL/MariaDB) if a table it would write is outside the database it landed in."""
        portal = landing.portal_databases(self.ctx.jobspec.extra)
        bounds = usernode.from_spec(self.ctx.jobspec.extra, "destination")
        found = landing.check_jdbc(self.ctx.spark, self._options(), self.what, portal=portal, bounds=bounds)
        marker = self.props.get("writer.jdbc.marker.table") or "flowport_publish_marker"
        names = {
            self.props.describe("writer.jdbc.table"): [self.table],
            self.props.describe("writer.jdbc.marker.table"): [marker],
        }
        landing.own_database(found, names, self.what, bounds)

    def _options(self) -> dict[str, str]:
        dialect = dialect_for(self.url, "writer.jdbc.url")
        options = {
            "url": dialect.spark_url(self.url),
            "driver": self.props.get("writer.jdbc.driver") or dialect.driver,
        }
        user = self.props.get("writer.jdbc.username")
        password = self.props.get("writer.jdbc.password")
        if user:
            options["user"] = user
        if password:
            options["password"] = password
        options["batchsize"] = self.props.get("writer.jdbc.batchsize", "5000") or "5000"
        if dialect is POSTGRESQL:
            # pgJDBC sends a batch as multi-row INSERTs instead of one INSERT per row: measured by
            # tests/bench/bench_cdc.py, staging takes about 60 % of the time (a URL parameter wins).
            options["reWriteBatchedInserts"] = "true"
        return options

    def write(self, df: DataFrame) -> WriteResult:
        self._stage(df, self.staging_table)
        return WriteResult(staging_table=self.staging_table)

    def stage_errors(self, df: DataFrame) -> str:
        """Stage the task's bad records beside the branch's rows (:mod:`portal.pipeline.destinations.badtables`);
        the staging table's name."""
        table = self.staging_table + "_err"
        self._stage(df, table)
        self.error_staging_table = table
        return table

    def _stage(self, df: DataFrame, table: str) -> None:
        """Write ``df`` to a fresh staging ``table``: made by Spark's writer, or here where Spark
        cannot make it right — SQLite (Spark cannot probe its tables), MariaDB/MySQL (Spark's types
        drop microseconds, end in 2038 and cut blobs at 64 KiB) and, on PostgreSQL, columns
        that keep their source's type (:mod:`portal.pipeline.destinations.pgtypes`), whose text the
        server then reads as that type (``stringtype=unspecified``)."""
        mode, options = "overwrite", self._options()
        dialect = dialect_for(self.url, "writer.jdbc.url")
        if dialect is not POSTGRESQL:
            df = refuse_floats(as_json_text(df), dialect)
        df = refuse_nul_text(df, dialect)
        if dialect.own_ddl:  # SQLite, MariaDB/MySQL: the table is made here, in the dialect's types
            columns = [(f.name, dialect.column_type(f.dataType) or "TEXT") for f in df.schema.fields]
            self._target().create(table, columns)
            mode = "append"
            if dialect.name == "mysql":
                df = sent_exactly(df)
        elif dialect is POSTGRESQL and (pgtypes.kept_any(df.schema) or pgtypes.dated_any(df.schema)):
            kinds = [
                (f.name, pgtypes.column_type(f.dataType, f.metadata, arrays=True)) for f in df.schema.fields
            ]
            if all(kind for _, kind in kinds):  # else Spark's own types, the kept ones as text
                with self._pg() as conn:
                    ident = pgconn.table_ident(table)
                    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident))
                    conn.execute(sql.SQL("CREATE TABLE {} ({})").format(ident, pgtypes.columns_sql(kinds)))
                options["stringtype"] = "unspecified"
                mode = "append"
                df = dates_as_text(df)
        df.write.format("jdbc").options(**options).option("dbtable", table).mode(mode).save()

    def _target(self) -> JdbcTarget:
        """The destination through a MySQL/MariaDB or SQLite connection of ours."""
        return JdbcTarget(
            self.url,
            self.props.get("writer.jdbc.username"),
            self.props.get("writer.jdbc.password"),
            what=self.what,
            bounds=usernode.from_spec(self.ctx.jobspec.extra, "destination"),
        )

    def _pg(self) -> Any:
        """The PostgreSQL destination through a psycopg connection of ours (autocommit)."""
        return pgconn.connect(
            self.url,
            self.props.get("writer.jdbc.username"),
            self.props.get("writer.jdbc.password"),
            what=self.what,
            bounds=usernode.from_spec(self.ctx.jobspec.extra, "destination"),
            autocommit=True,
        )

    def abort(self) -> None:
        for table in (self.staging_table, self.error_staging_table):
            if table:
                self._drop(table)

    def _drop(self, table: str) -> None:
        try:
            if not self.url.startswith("jdbc:postgresql:"):
                target = self._target()
                with target.connect() as conn:
                    target.drop(conn, table)
                return
            with self._pg() as conn:
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(pgconn.table_ident(table)))
        except Exception:  # noqa: S110 - best effort; a leftover staging table is harmless
            pass


def _left_over(prefix: str, name: str, current: int, keep: set[int]) -> bool:
    staged = staged_by(prefix, name)
    return staged is not None and staged < current and staged not in keep


@register_step_type
class JdbcPublishCommitStep(SecretBearingStep):
    type = "jdbc_publish"
    FIELDS = (
        "dataset_urn",
        "branch",
        "url",
        "user",
        "password_property",
        "target_table",
        "marker_table",
        "staging_tables",
        "rows",
        "execution_id",
        "job_name",
        "merge_keys",
        "merge_order",
        "evolve",
        "write_mode",
        "delete_column",
        "replace_range",
        "user_node",  # a judged login's bounds (portal.pipeline.usernode), else None
    )

    REQUIRED = ("url", "target_table", "staging_tables", "execution_id", "job_name")

    def __init__(self, data: Mapping[str, Any], password: str | None = None) -> None:
        super().__init__(data, password)
        self.data["marker_table"] = self.data["marker_table"] or "flowport_publish_marker"

    def _connect(self) -> Any:
        return pgconn.connect(
            self.data["url"], self.data["user"], self.password, bounds=usernode.from_step(self.data)
        )

    def _merge(self) -> tuple[list[str], str | None]:
        """Upsert keys (empty: append) and the column whose latest value wins within a run."""
        return list(self.data.get("merge_keys") or []), self.data.get("merge_order")

    def _mode(self) -> str:
        """The write mode (steps stored before write modes existed: merge when they carry keys)."""
        return self.data.get("write_mode") or ("merge" if self.data.get("merge_keys") else "append")

    def _key(self) -> tuple[int, str, str, int]:
        d = self.data
        return int(d["execution_id"]), str(d["job_name"]), str(d["dataset_urn"]), int(d["branch"])

    def _marker(self, conn: Any) -> tuple[str, int] | None:
        exists = conn.execute("SELECT to_regclass(%s)", (self.data["marker_table"],)).fetchone()[0]
        if exists is None:
            return None
        row = conn.execute(
            sql.SQL(
                "SELECT target_table, rows FROM {} WHERE execution_id=%s AND job_name=%s AND dataset_urn=%s AND branch=%s"
            ).format(pgconn.table_ident(self.data["marker_table"])),
            self._key(),
        ).fetchone()
        return (row[0], int(row[1])) if row else None

    def _same(self, marker: tuple[str, int]) -> bool:
        target, rows = marker
        if target == self.data["target_table"] and (
            self.data["rows"] is None or rows == int(self.data["rows"])
        ):
            return True
        raise CommitConflictError(
            f"publish marker {self._key()} in {self.data['marker_table']} records {rows} row(s) into {target}, "
            f"but this step publishes {self.data['rows']} row(s) into {self.data['target_table']}"
        )

    def _before(self, mode: str) -> list[str]:
        """What goes before the rows of an existing target: emptied (overwrite), or a backfill's
        range of it deleted (an appending backfill replaces what it reads again)."""
        if mode == "overwrite":
            return [jdbc_modes.clear(POSTGRESQL, self.data["target_table"])]
        span = self.data.get("replace_range")
        if mode == "append" and span:
            statement = jdbc_modes.range_delete(
                POSTGRESQL, self.data["target_table"], span["column"], span.get("low"), span.get("high")
            )
            return [statement] if statement else []
        return []

    def _after(self, dialect: Any, mode: str, columns: list[str]) -> list[str]:
        """What follows the staged rows' move: a merge's deletes, or the whole of a history."""
        keys, order = self._merge()
        d = self.data
        if mode == "merge":
            return jdbc_modes.merge_deletes(
                dialect, d["target_table"], d["staging_tables"], columns, keys, order, d.get("delete_column")
            )
        if mode == "history":
            return jdbc_modes.history(
                dialect, d["target_table"], d["staging_tables"], columns, keys, order,
                d.get("delete_column"), dt.datetime.now(dt.UTC),
            )  # fmt: skip
        return []

    def _other_dialect(self) -> JdbcTarget | None:
        """MySQL/MariaDB and SQLite destinations publish through :mod:`portal.pipeline.destinations.jdbc_targets`."""
        url = str(self.data["url"])
        return (
            None
            if url.startswith("jdbc:postgresql:")
            else JdbcTarget(url, self.data["user"], self.password, bounds=usernode.from_step(self.data))
        )

    def target_identity(self) -> tuple[str, bool]:
        """The target table as its database names it (``schema.table``; an unqualified name in the
        schema it would be created in) and whether it exists: what the portal records a table's
        owner by (portal.topology.tables), asked before anything is published."""
        other = self._other_dialect()
        if other is not None:
            with other.connect() as conn:
                return other.identity(conn, self.data["target_table"])
        target = str(self.data["target_table"])
        with self._connect() as conn:
            row = conn.execute(
                "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.oid = to_regclass(%s)",
                (POSTGRESQL.quote(target),),
            ).fetchone()
            if row is not None:
                return f"{row[0]}.{row[1]}", True
            schema, _, name = target.rpartition(".")
            schema = schema.strip('"') or conn.execute("SELECT current_schema()").fetchone()[0] or "public"
            return f"{schema}.{name.strip(chr(34))}", False

    def sweep(self, keep: set[int]) -> list[str]:
        """Drop the staging tables earlier executions of this job left beside the target — staged,
        then killed or given up before their commit steps were stored — but those of ``keep`` (runs
        still going, steps still stored). Called once this step's execution has published (so none
        of its own is swept); best effort: a leftover is harmless, and said in the log."""
        d = self.data
        prefix = staging_prefix(str(d["job_name"]), str(d["target_table"]))
        schema = str(d["target_table"]).rpartition(".")[0].strip('"`')
        current = int(d["execution_id"])
        other = self._other_dialect()
        if other is not None:
            with other.connect() as conn:
                names = other.tables_starting(conn, prefix, schema)
                gone = [n for n in names if _left_over(prefix, n, current, keep)]
                for name in gone:
                    other.drop(conn, f"{schema}.{name}" if schema else name)
            return gone
        with self._connect() as conn:
            conn.autocommit = True
            rows = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = COALESCE(NULLIF(%s, ''), current_schema()) "
                "AND starts_with(tablename, %s)",
                (schema, prefix),
            ).fetchall()
            gone = [str(r[0]) for r in rows if _left_over(prefix, str(r[0]), current, keep)]
            for name in gone:
                qualified = f"{schema}.{name}" if schema else name
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(pgconn.table_ident(qualified)))
        return gone

    def verify(self) -> bool:
        target = self._other_dialect()
        if target is not None:
            with target.connect() as conn:
                marker = target.marker(conn, self.data["marker_table"], self._key())
                if marker is not None and self._same(marker):
                    for staging in self.data["staging_tables"]:  # left by a crash after the commit
                        target.drop(conn, staging)
                    return True
                return False
        with self._connect() as conn:
            marker = self._marker(conn)
            return marker is not None and self._same(marker)

    def execute(self) -> None:  # noqa: C901
        d = self.data
        target = self._other_dialect()
        if target is not None:
            done = target.publish(
                d["marker_table"],
                d["target_table"],
                list(d["staging_tables"]),
                d["rows"],
                self._key(),
                merge=self._merge(),
                evolve=bool(d.get("evolve")),
                mode=self._mode(),
                delete_column=d.get("delete_column"),
                replace_range=d.get("replace_range"),
            )
            if done is not None:
                self._same(done)
            return
        marker_table = pgconn.table_ident(d["marker_table"])
        target_ident = pgconn.table_ident(d["target_table"])
        with self._connect() as conn, conn.transaction():
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (execution_id bigint NOT NULL, job_name text NOT NULL, "
                    "dataset_urn text NOT NULL, branch int NOT NULL, target_table text NOT NULL, rows bigint NOT NULL, "
                    "published_at timestamptz NOT NULL DEFAULT now(), "
                    "PRIMARY KEY (execution_id, job_name, dataset_urn, branch))"
                ).format(marker_table)
            )
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (repr(self._key()),))
            marker = self._marker(conn)
            if marker is not None and self._same(marker):
                return
            total = 0
            mode = self._mode()
            keys, order = self._merge()
            target = d["target_table"]
            columns: list[str] = []
            swapped: set[str] = set()
            for index, staging in enumerate(d["staging_tables"]):
                if conn.execute("SELECT to_regclass(%s)", (staging,)).fetchone()[0] is None:
                    raise CommitConflictError(f"staging table {staging} is gone and no publish marker exists")
                staging_ident = pgconn.table_ident(staging)
                # Quoted as the table is created: a mixed-case name is not folded to lower case.
                target_name = POSTGRESQL.quote(target)
                new = conn.execute("SELECT to_regclass(%s)", (target_name,)).fetchone()[0] is None
                conn.execute(
                    sql.SQL("CREATE TABLE IF NOT EXISTS {} (LIKE {})").format(target_ident, staging_ident)
                )
                if new and mode == "merge":
                    conn.execute(POSTGRESQL.unique_index(target, keys))
                if new and mode == "history":
                    for statement in jdbc_modes.history_columns(POSTGRESQL, target):
                        conn.execute(statement)
                if d.get("evolve"):  # schema.evolution.policy=evolve: new and wider columns first
                    jdbc_evolution.evolve(POSTGRESQL, conn.execute, target, staging)
                columns = [
                    r[0]
                    for r in conn.execute(
                        sql.SQL("SELECT * FROM {} LIMIT 0").format(staging_ident)
                    ).description
                    or []
                ]
                staged = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(staging_ident)).fetchone()[0]
                total += staged
                if index == 0 and mode == "overwrite" and jdbc_modes.swappable(conn, target_name, staging):
                    for statement in jdbc_modes.swap(target, staging):
                        conn.execute(statement)
                    swapped.add(staging)  # the target now: its rows are not copied again
                    continue
                if index == 0 and not new:
                    for statement in self._before(mode):
                        conn.execute(statement)
                if mode == "merge":
                    jdbc_modes.pg_merge(conn, target, staging, columns, keys, order, staged)
                elif mode != "history":
                    conn.execute(POSTGRESQL.move_rows(target, staging, columns, [], order))
            for statement in self._after(POSTGRESQL, mode, columns):
                conn.execute(statement)
            for staging in d["staging_tables"]:
                if staging not in swapped:
                    conn.execute(sql.SQL("DROP TABLE {}").format(pgconn.table_ident(staging)))
            if d["rows"] is not None and total != int(d["rows"]):
                raise CommitConflictError(
                    f"staging tables of {d['dataset_urn']} hold {total} row(s), expected {d['rows']}; not published"
                )
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (execution_id, job_name, dataset_urn, branch, target_table, rows) "
                    "VALUES (%s, %s, %s, %s, %s, %s)"
                ).format(marker_table),
                (*self._key(), d["target_table"], total),
            )


# JSON text keeps a time stamp's microseconds (Spark's default format stops at milliseconds).
_EXACT_JSON = {
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}


def as_json_text(df: DataFrame) -> DataFrame:
    """``df`` with its arrays, maps and structs as their JSON text: MariaDB and SQLite have no such
    column types (Spark's writer fails the run, "Can't get JDBC type for array<int>"), and JSON keeps
    every element, a NULL one and the string 'NULL' apart (README, "Types")."""
    nested = (T.ArrayType, T.MapType, T.StructType)
    if not any(isinstance(f.dataType, nested) for f in df.schema.fields):
        return df
    return df.select(
        *[
            F.to_json(F.col(f"`{f.name}`"), _EXACT_JSON).alias(f.name)
            if isinstance(f.dataType, nested)
            else F.col(f"`{f.name}`")
            for f in df.schema.fields
        ]
    )


def sent_exactly(df: DataFrame) -> DataFrame:
    """``df`` as MariaDB's driver sends it without a change: a float as a double (its own shortest
    text, ``3.4028235E38`` for the largest, is past what a ``FLOAT`` holds and refused), a date or
    time stamp as its text (a ``java.sql`` one before 1582-10-15 is a Julian date: 1000-01-01 days
    off, the ten days that calendar skips moved ten days on; an instant's text is its UTC time, the
    session's zone)."""
    return _cast(
        df,
        {
            T.FloatType: "double",
            T.DateType: "string",
            T.TimestampType: "string",
            T.TimestampNTZType: "string",
        },
    )


def dates_as_text(df: DataFrame) -> DataFrame:
    """``df`` with its dates and time stamps (arrays of them too) as their text, which a PostgreSQL
    server told to read text as the column's type (``stringtype=unspecified``) reads in its
    calendar, the proleptic Gregorian one Spark's is: a ``java.sql`` date before 1582-10-15 is a
    Julian one, and the ten days that calendar skips (1582-10-05 to 14) would arrive ten days on.
    An instant's text carries its offset, whatever the server session's zone."""

    def text(column: Column, dtype: T.DataType) -> Column:
        if isinstance(dtype, T.ArrayType):  # an array literal: the server has no text[] to date[] cast
            elements = F.transform(
                column,
                lambda e: F.when(e.isNull(), F.lit("NULL")).otherwise(
                    F.concat(F.lit('"'), text(e, dtype.elementType), F.lit('"'))
                ),
            )
            return F.concat(F.lit("{"), F.array_join(elements, ","), F.lit("}"))
        if type(dtype) is T.TimestampType:
            return F.date_format(column, "yyyy-MM-dd HH:mm:ss.SSSSSSxxx")
        return column.cast("string")

    if not pgtypes.dated_any(df.schema):
        return df
    return df.select(
        *[
            text(F.col(f"`{f.name}`"), f.dataType).alias(f.name, metadata=f.metadata)
            if pgtypes.dated(f.dataType)
            else F.col(f"`{f.name}`")
            for f in df.schema.fields
        ]
    )


def _cast(df: DataFrame, casts: dict[type[T.DataType], str]) -> DataFrame:
    """``df`` with each column of a type in ``casts`` cast to the type named there; field metadata
    kept."""
    if not any(type(f.dataType) in casts for f in df.schema.fields):
        return df

    def sent(f: T.StructField) -> Column:
        column, to = F.col(f"`{f.name}`"), casts.get(type(f.dataType))
        return column if to is None else column.cast(to).alias(f.name, metadata=f.metadata)

    return df.select(*[sent(f) for f in df.schema.fields])


def refuse_nul_text(df: DataFrame, dialect: Dialect) -> DataFrame:
    """``df`` failing, in the same pass that writes it, at the first text holding the NUL
    character where the database cannot store one (``dialect.refuses_nul_text``), naming the
    column (a MariaDB ``TEXT`` or a file may hold it; PostgreSQL's ``text`` may not)."""
    if not dialect.refuses_nul_text or not any(
        isinstance(f.dataType, T.StringType) for f in df.schema.fields
    ):
        return df
    columns = []
    for f in df.schema.fields:
        column = F.col(f"`{f.name}`")
        if isinstance(f.dataType, T.StringType):
            message = (
                f"column '{f.name}' holds a text with the NUL character (0x00), which {dialect.label} "
                "cannot store in a text column: the destination was not changed"
            )
            column = (
                F.when(F.instr(column, "\u0000") > 0, F.raise_error(F.lit(message)))
                .otherwise(column)
                .alias(f.name, metadata=f.metadata)  # a kept source type (uuid, jsonb, ...) stays
            )
        columns.append(column)
    return df.select(*columns)


def refuse_floats(df: DataFrame, dialect: Dialect) -> DataFrame:
    """``df`` failing, in the same pass that writes it, at the first float the database cannot hold
    (``dialect.refused_floats``), naming the column: never a value dropped or changed on the way,
    never the driver's "Unknown column 'NaN' in 'VALUES'"."""
    floats = (T.FloatType, T.DoubleType)
    if not dialect.refused_floats or not any(isinstance(f.dataType, floats) for f in df.schema.fields):
        return df
    what = " or ".join(", ".join(dialect.refused_floats).rsplit(", ", 1))
    columns = []
    for f in df.schema.fields:
        column = F.col(f"`{f.name}`")
        if isinstance(f.dataType, floats):
            refused = [
                column.isin(float(v)) if v != "NaN" else F.isnan(column) for v in dialect.refused_floats
            ]
            message = (
                f"column '{f.name}' holds {what}, which {dialect.label} cannot store "
                "(Parquet, PostgreSQL and Iceberg can): the destination was not changed"
            )
            bad = refused[0]
            for more in refused[1:]:
                bad = bad | more
            column = (
                F.when(bad, F.raise_error(F.lit(message)))
                .otherwise(column)
                .alias(f.name, metadata=f.metadata)
            )
        columns.append(column)
    return df.select(*columns)
