"""The topology's revision: a token and a number that move with every change of the
catalog, inside the change's transaction, with `topology_catalog_changed` sent there too,
so listeners (recompiling flows) see exactly the committed topology or nothing. Compiled
flows record the number they were compiled at; a mismatch is what makes them stale."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db.models import F
from django.utils import timezone

from portal.topology.models import TopologyRevision
from portal.topology.signals import topology_catalog_changed

_batch = threading.local()


@contextmanager
def batched_changes() -> Iterator[None]:
    """Many changes, one event: the topology file sync (and anything else
    that changes several entries at once) notifies listeners once at the end
    instead of recompiling every flow per entry. Use inside a transaction."""
    if getattr(_batch, "depth", 0):
        yield
        return
    _batch.depth, _batch.dirty = 1, False
    try:
        yield
        dirty = _batch.dirty
    finally:
        _batch.depth = 0
    if dirty:
        changed("topology", "update", None)


def changed(kind: str, action: str, instance: Any) -> None:
    """Move the revision token and tell listeners; call inside the transaction."""
    if getattr(_batch, "depth", 0):
        _batch.dirty = True
        return
    updated = TopologyRevision.objects.filter(pk=1).update(
        token=uuid.uuid4(), number=F("number") + 1, changed=timezone.now()
    )
    if not updated:
        TopologyRevision.objects.get_or_create(pk=1, defaults={"number": 1})
    sender = type(instance) if instance is not None else TopologyRevision
    topology_catalog_changed.send(sender=sender, action=action, kind=kind, instance=instance)


def current_revision() -> uuid.UUID | None:
    return TopologyRevision.objects.filter(pk=1).values_list("token", flat=True).first()


def current_revision_number() -> int:
    """The order of topology revisions (0 before the first change)."""
    return TopologyRevision.objects.filter(pk=1).values_list("number", flat=True).first() or 0
