"""A PostgreSQL extract staged in a PostgreSQL destination by ``COPY``, skipping Spark's rows.

The PostgreSQL log sends every value as the server prints it (:mod:`portal.pipeline.cdc.pgoutput`).
Through Spark, the cdc source's text is cast to Spark's types, turned into rows in the JVM and
sent by the JDBC writer as batched ``INSERT`` statements, which the server parses again: measured
by tests/bench/bench_cdc.py, that staging was most of a run into PostgreSQL. A PostgreSQL
destination reads its own text forms back exactly, so here the staged files
(:class:`portal.pipeline.sources.base.TextScan`) go to the branch's staging table as they are, in
one ``COPY`` of CSV that Arrow writes: no value is parsed in Python or in the JVM.

The staging table is the one Spark's writer would make for the extract's schema (the same name,
column names and types, :func:`column_type`), so the publish step's write modes, schema evolution
and checks see no difference. It is made and filled in one transaction on a connection judged
where it lands (:func:`portal.pipeline.pgconn.connect`), so a failed copy leaves nothing to publish
and the writer's abort drops what a crash after the commit left.

The server parses each value: a value its column type cannot take fails the run, naming the
column, where Spark's cast would have staged NULL in its place (an unconstrained ``numeric`` too
wide for the decimal it is staged as); a value Spark cannot read but the server can (a date before
the common era, ``infinity``) is kept as the server has it.

Taken (:func:`eligible`) only for one branch taking every record unchanged, a JDBC writer on a
``jdbc:postgresql:`` URL, text from PostgreSQL and an extract whose schema no rule changed.
"""

from __future__ import annotations

import io
from typing import Any

import psycopg
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
from psycopg import sql
from pyspark.sql import types as T

from portal.pipeline import landing, pgconn, usernode
from portal.pipeline.destinations.base import WriteResult
from portal.pipeline.destinations.jdbc import JdbcDataWriter
from portal.pipeline.destinations.pgtypes import column_type
from portal.pipeline.dialects import POSTGRESQL, dialect_for
from portal.pipeline.errors import PipelineError
from portal.pipeline.sources.base import TextScan

_CSV = pcsv.WriteOptions(include_header=False, batch_size=65_536)


def eligible(text: TextScan | None, schema: T.StructType, writer: Any) -> bool:
    """Whether ``writer`` may take ``text`` as it is, for an extract now of ``schema``; the caller
    has checked that the task has one branch taking every record of a plain feed unchanged."""
    return (
        text is not None
        and text.dialect == "postgresql"
        and text.schema == schema
        and type(writer) is JdbcDataWriter
        and dialect_for(writer.url, "writer.jdbc.url") is POSTGRESQL
        and all(column_type(f.dataType, f.metadata) for f in schema.fields)
    )


def write(text: TextScan, writer: JdbcDataWriter) -> tuple[WriteResult, int]:
    """Make the branch's staging table and copy the files into it; the result and the rows copied."""
    table = pgconn.table_ident(writer.staging_table)
    columns = sql.SQL(", ").join(
        sql.SQL("{} {}{}").format(
            sql.Identifier(f.name),
            sql.SQL(column_type(f.dataType, f.metadata) or ""),
            sql.SQL("" if f.nullable else " NOT NULL"),
        )
        for f in text.schema.fields
    )
    names = sql.SQL(", ").join(sql.Identifier(f.name) for f in text.schema.fields)
    rows = 0
    with pgconn.connect(
        writer.url,
        writer.props.get("writer.jdbc.username"),
        writer.props.get("writer.jdbc.password"),
        what=writer.what,
        portal=landing.portal_databases(writer.ctx.jobspec.extra),
        bounds=usernode.from_spec(writer.ctx.jobspec.extra, "destination"),
    ) as conn:
        conn.execute("SET TimeZone = 'UTC'")  # as Spark's session reads a timestamp without a zone
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(table, columns))
        copy_sql = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(table, names)
        try:
            with conn.cursor() as cur, cur.copy(copy_sql) as copy:
                for path in text.paths:
                    for batch in pq.ParquetFile(path).iter_batches(65_536, columns=text.columns):
                        out = io.BytesIO()
                        pcsv.write_csv(batch, out, _CSV)
                        copy.write(out.getbuffer())
                        rows += batch.num_rows
        except psycopg.errors.DataError as error:  # a value its column type cannot take
            raise PipelineError(f"{writer.what}: staging the rows: {_first_line(error)}") from None
        conn.commit()
    return WriteResult(staging_table=writer.staging_table), rows


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    context = error.diag.context if isinstance(error, psycopg.Error) and error.diag.context else ""
    return "; ".join(x for x in (lines[0] if lines else "", context.splitlines()[0] if context else "") if x)
