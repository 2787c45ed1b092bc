"""Writing many rows that differ in a few columns, at the database's speed.

Django's ``bulk_create`` builds a model instance per row and prepares every
field of every row in Python (about 0.2 ms a row here), which made the
scheduler's top-of-the-hour burst (tens of thousands of ticks, each an
execution and its LAUNCH action) take tens of seconds. On PostgreSQL the rows
go instead as one ``INSERT … SELECT … FROM unnest(…)``: the columns that
differ travel as one typed array each, and every other column is prepared
once, from a prototype instance, by Django's own field code (defaults,
``auto_now_add``, JSON), so the statement follows the model as it changes.
Elsewhere (the embedded SQLite) it is ``bulk_create``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from django.db import connection, models
from django.db.models.expressions import RawSQL
from psycopg.types.json import _JsonWrapper


def insert_rows(model: type[models.Model], varying: Mapping[str, Sequence[Any]], **constants: Any) -> int:
    """Insert one row per position of the ``varying`` columns (attribute
    names, equal lengths, values the driver sends as they are: numbers,
    strings, aware datetimes); the other fields take ``constants`` or their
    defaults. Returns the number of rows inserted; no ids come back."""
    counts = {len(values) for values in varying.values()}
    if len(counts) != 1:
        raise ValueError("every varying column needs the same number of values")
    count = counts.pop()
    if not count:
        return 0
    unknown = set(varying) - {field.attname for field in model._meta.concrete_fields}
    if unknown:
        raise ValueError(f"{model.__name__} has no column(s) {sorted(unknown)}")
    if connection.vendor != "postgresql":
        names = list(varying)
        model._default_manager.bulk_create(
            model(**constants, **dict(zip(names, row, strict=True)))
            for row in zip(*varying.values(), strict=True)
        )
        return count
    prototype = model(**constants)
    quote = connection.ops.quote_name
    columns: list[str] = []
    selected: list[str] = []
    constant_params: list[Any] = []
    unnests: list[str] = []
    array_params: list[Any] = []
    for field in model._meta.concrete_fields:
        if field.primary_key or field.column is None:  # concrete fields always have a column
            continue
        columns.append(quote(field.column))
        db_type = field.cast_db_type(connection)
        if field.attname in varying:
            selected.append(f"v.c{len(unnests)}")
            unnests.append(f"unnest(%b::{db_type}[])")
            array_params.append(list(varying[field.attname]))
        else:
            selected.append(f"%s::{db_type}")
            value = field.pre_save(prototype, add=True)
            constant_params.append(field.get_db_prep_save(value, connection))
    # ROWS FROM zips the arrays position by position into rows. Every name comes
    # from the model's own metadata and every value is a parameter.
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(columns)}) "  # noqa: S608
        f"SELECT {', '.join(selected)} FROM ROWS FROM ({', '.join(unnests)}) "
        f"AS v({', '.join(f'c{n}' for n in range(len(unnests)))})"
    )
    connection.ensure_connection()
    # Server-side binding: the arrays go as typed parameters instead of being
    # quoted into the SQL text as Django's client-side cursors would.
    # Django's own error classes (IntegrityError, …), as its cursors raise them.
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, [*constant_params, *array_params])
        return cursor.rowcount


def update_rows(objs: list[Any], fields: list[str]) -> None:
    """Set `fields` of each object's row, by primary key. Django's bulk_update
    builds a CASE expression per row and field, which costs more Python time
    than the compile itself for a batch of flows. On PostgreSQL it is one
    ``UPDATE … FROM unnest(…)`` with a typed array per column, as in
    insert_rows (a statement per row, even pipelined, made the server plan
    and execute each one: a third of a topology change's recompile);
    elsewhere one UPDATE per row (executemany)."""
    model = type(objs[0])
    meta = model._meta
    columns = [meta.get_field(name) for name in fields]
    quote = connection.ops.quote_name
    values = [
        [field.get_db_prep_save(getattr(obj, field.attname), connection) for obj in objs] for field in columns
    ]
    keys = [obj.pk for obj in objs]
    if connection.vendor != "postgresql":
        sql = (  # names from the model's own metadata, values as parameters
            f"UPDATE {quote(meta.db_table)} SET "  # noqa: S608
            + ", ".join(f"{quote(field.column)} = %s" for field in columns)
            + f" WHERE {quote(meta.pk.column)} = %s"
        )
        with connection.cursor() as cursor:
            cursor.executemany(sql, [[*row, key] for *row, key in zip(*values, keys, strict=True)])
        return
    table, pk = quote(meta.db_table), quote(meta.pk.column)
    casts = [field.cast_db_type(connection) for field in columns]
    arrays: list[str] = []
    for n, column in enumerate(values):
        if column and isinstance(column[0], _JsonWrapper):
            # JSON travels as text and is cast on the server: psycopg dumps an
            # array of JSON values by escaping every character with a regex
            # (Python time comparable to the whole compile).
            values[n] = [None if v is None else v.dumps(v.obj) for v in column]
            arrays.append("text")
        else:
            arrays.append(casts[n])
    unnests = [f"unnest(%b::{array}[])" for array in arrays]
    unnests.append(f"unnest(%b::{meta.pk.cast_db_type(connection)}[])")
    sql = (  # names from the model's own metadata, values as typed array parameters
        f"UPDATE {table} AS t SET "  # noqa: S608
        + ", ".join(f"{quote(field.column)} = v.c{n}::{casts[n]}" for n, field in enumerate(columns))
        + f" FROM ROWS FROM ({', '.join(unnests)}) AS v({', '.join(f'c{n}' for n in range(len(columns)))}, k)"
        + f" WHERE t.{pk} = v.k"
    )
    connection.ensure_connection()
    # Server-side binding in binary: the values (a compiled DAG is a few KB of
    # JSON) travel as parameters, with no quoting or escaping in Python.
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, [*values, keys])


def any_of(keys: Sequence[int]) -> Sequence[int] | RawSQL:
    """The right side of a ``pk__in=`` for thousands of keys: on PostgreSQL one
    array parameter, not one placeholder per key (the driver parses a query's
    placeholders in Python, which cost a top of the hour's scheduler pass
    about a second)."""
    if connection.vendor != "postgresql":
        return keys
    return RawSQL("SELECT unnest(%s::bigint[])", (list(keys),))


def delete_rows(queryset: models.QuerySet) -> int:
    """Delete a queryset's rows with one DELETE, reading none of them into
    Python (Django's delete() loads every row as a model to find what cascades):
    for history tables whose children the caller deletes first, in the same
    transaction, so a foreign key still refuses an orphan. Returns the rows deleted."""
    return queryset._raw_delete(queryset.db)
