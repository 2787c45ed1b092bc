"""A model field whose column holds only sealed text (crypto.atrest) while Python code reads and
writes the plain value: the webhook URL of a subscription reaches the sender as it was typed and
the database, its backups and anyone with SQL access see `SEALED:...`.

Sealing is randomized, so the field cannot be looked up by value (``filter(url=...)``); the empty
string stays empty, so ``exclude(url="")`` works."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection, models

from portal.crypto import atrest
from portal.crypto.errors import WrappedKeyError
from portal.crypto.master import MasterKeyRing, get_ring
from portal.keys.rotation import WrappedKeyHolder


class SealedCharField(models.CharField):
    """`max_length` bounds the plain value (forms and validation); the column is text, as the
    sealed value is longer."""

    def get_internal_type(self) -> str:
        return "TextField"

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return atrest.unseal(get_ring(), value) if atrest.is_sealed(value) else value

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value and not atrest.is_sealed(value):
            return atrest.seal(get_ring(), value)
        return value


def holder_of(model: type[models.Model], field_name: str) -> WrappedKeyHolder:
    """What master key rotation needs of a model's sealed column. It reads and writes the column
    with SQL because every ORM read of the field unseals it, hiding the master key id."""
    table = connection.ops.quote_name(model._meta.db_table)
    field, key = model._meta.get_field(field_name), model._meta.pk
    assert isinstance(field, models.Field) and key is not None and field.column and key.column
    column, pk = connection.ops.quote_name(field.column), connection.ops.quote_name(key.column)

    def sealed_rows() -> list[tuple[Any, str]]:
        with connection.cursor() as cursor:
            # Only quoted names of our own model go into the statement.
            select = f"SELECT {pk}, {column} FROM {table} WHERE {column} LIKE %s"  # noqa: S608
            cursor.execute(select, [atrest.PREFIX + "%"])
            return list(cursor.fetchall())

    def master_key_ids() -> Iterable[str]:
        return [key_id for _pk, text in sealed_rows() if (key_id := atrest.master_key_id(text))]

    def rewrap(ring: MasterKeyRing, failures: list[str]) -> int:
        done = 0
        for row_pk, text in sealed_rows():
            if atrest.master_key_id(text) == ring.active_id:
                continue
            try:
                resealed = atrest.reseal(ring, text)
            except WrappedKeyError as error:
                failures.append(f"{model._meta.label} {row_pk}: the sealed {field_name} {error}")
                continue
            with connection.cursor() as cursor:
                update = f"UPDATE {table} SET {column} = %s WHERE {pk} = %s"  # noqa: S608
                cursor.execute(update, [resealed, row_pk])
            done += 1
        return done

    return WrappedKeyHolder(name=model._meta.label, master_key_ids=master_key_ids, rewrap=rewrap)
