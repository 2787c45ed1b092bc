"""An Iceberg catalog is told where things are, never believed: every location it returns stays in
the destination node's warehouse.

A SQL catalog is a database row naming a metadata file, and that file names manifest lists,
manifests, data files and the table's location, where new files go. Whoever controls the catalog
(a user-made node's owner does) controls every one of those strings. Left alone, pyiceberg would
read ``/etc/passwd`` as metadata (and put its text in the error), or write a run's files into
another user's area. So the catalog gets :class:`ConfinedFileIO` as its only FileIO: every read,
write and delete of the catalog, of its tables and of their scans passes :func:`confine` first
(the resolved real path, symlinks followed, or the URI prefix: :mod:`portal.pipeline.confinement`).
A table's own properties cannot swap that FileIO (``py-io-impl``) nor name a class of their own
(a location provider): such a table is refused. A metadata file that is not Iceberg metadata fails
with a plain reason; the parser's words (which quote the file) are dropped, traceback included.
"""

from __future__ import annotations

from typing import Any

from pyiceberg.io import InputFile, OutputFile
from pyiceberg.io.pyarrow import PyArrowFileIO

from portal.pipeline import confinement
from portal.pipeline.errors import ConfigError

# The catalog property carrying the warehouse every location is confined to.
WAREHOUSE_PROPERTY = "flowport.confined.warehouse"
IO_IMPL = f"{__name__}.ConfinedFileIO"
# Table properties that make pyiceberg import a class the table names.
CLASS_PROPERTIES = ("py-io-impl", "write.py-location-provider.impl")


class IcebergLocationError(ConfigError):
    """The catalog put something outside the destination's warehouse (or named a class of its own)."""


def confine(location: str, warehouse: str, what: str = "a file") -> str:
    """``location`` when it lies in ``warehouse`` (resolved), else the plain refusal: it names
    neither the location nor whether something is there, so it answers no question about what
    lies outside."""
    if not location or not confinement.is_inside(location, warehouse):
        raise IcebergLocationError(
            f"refused: the Iceberg catalog puts {what} outside the destination's warehouse "
            "(nothing was read or written there)"
        )
    return location


class ConfinedFileIO(PyArrowFileIO):
    """pyiceberg's Arrow FileIO that touches nothing outside the warehouse."""

    def __init__(self, properties: dict[str, str] | None = None) -> None:
        super().__init__(properties or {})
        self.warehouse = self.properties[WAREHOUSE_PROPERTY]

    def new_input(self, location: str) -> Any:
        return super().new_input(confine(location, self.warehouse))

    def new_output(self, location: str) -> Any:
        return super().new_output(confine(location, self.warehouse, "a new file"))

    def delete(self, location: str | InputFile | OutputFile) -> None:
        text = location.location if isinstance(location, (InputFile, OutputFile)) else location
        confine(text, self.warehouse, "a file to delete")
        super().delete(location)


def catalog_properties(warehouse: str) -> dict[str, str]:
    """What makes a catalog use :class:`ConfinedFileIO` on ``warehouse``."""
    return {"py-io-impl": IO_IMPL, WAREHOUSE_PROPERTY: warehouse}


def checked_table(table: Any, warehouse: str) -> Any:
    """A loaded table whose location is in the warehouse and whose properties name no class."""
    named = [key for key in CLASS_PROPERTIES if key in table.metadata.properties]
    if named:
        raise IcebergLocationError(
            f"refused: the Iceberg table {'.'.join(table.name())} names a class of its own ({', '.join(named)})"
        )
    confine(table.location(), warehouse, "the table's location")
    return table


def unreadable_metadata(identifier: str) -> IcebergLocationError:
    """The plain failure of a metadata file that does not parse (the parser's text quotes it)."""
    return IcebergLocationError(
        f"the Iceberg catalog's metadata file of {identifier} is not Iceberg table metadata"
    )
