"""Topology catalog events, the seed's TopologyCatalogListener: one Django
signal, the same mechanism as `flows.signals`.

Sent by `topology.services` inside the saving transaction with `action`
("add", "update", "delete"), `kind` ("executor", "datanode", "capability")
and `instance`. Receivers (the compiler's recompile, the scheduler's retry of
pending flows) commit or roll back with the change.
"""

from django.dispatch import Signal

topology_catalog_changed = Signal()
