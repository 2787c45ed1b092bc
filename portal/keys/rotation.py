"""Master key rotation: a new active master key, then every stored customer
key and every flow's `encrypt.wrapped.key` re-wrapped with it. Property
values are never touched: the customer key inside the envelope is the same,
so every ENC(...) value stays as it is and decrypts as before.

Crash-safe by order: the key file gains the new key first (old keys stay and
still unwrap), then rows are re-wrapped one by one; running it again finishes
an interrupted rotation (`rewrap_only=True` does so without another new key).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from portal.crypto import wrapping
from portal.crypto.errors import MasterKeyError, WrappedKeyError
from portal.crypto.master import MasterKeyRing, get_ring, key_source, write_ring_file
from portal.keys.models import CustomerKey

logger = logging.getLogger(__name__)


@dataclass
class RotationReport:
    active_id: str
    added: bool
    customer_keys_rewrapped: int = 0
    flows_rewrapped: int = 0
    failures: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    still_used: dict[str, int] = field(default_factory=dict)  # old master key id → rows using it


@dataclass(frozen=True)
class WrappedKeyHolder:
    """Rows of an app above keys that keep wrapped customer keys (a flow's
    `encrypt.wrapped.key`). The app registers itself at start-up
    (AppConfig.ready), so rotation re-wraps them without importing it."""

    name: str
    # The master key id of every wrapped key held (an unparsable one is left out).
    master_key_ids: Callable[[], Iterable[str]]
    # Re-wrap with the ring's active key; append a line per failure, return the rows re-wrapped.
    rewrap: Callable[[MasterKeyRing, list[str]], int]


_holders: list[WrappedKeyHolder] = []


def register_wrapped_key_holder(holder: WrappedKeyHolder) -> None:
    if all(known.name != holder.name for known in _holders):
        _holders.append(holder)


def master_keys_in_use() -> Counter:
    """Master key id → how many customer keys and flows are wrapped with it."""
    used = Counter(CustomerKey.objects.values_list("master_key_id", flat=True))
    for holder in _holders:
        used.update(holder.master_key_ids())
    return used


def _rewrap_customer_keys(ring: MasterKeyRing, report: RotationReport) -> None:
    for record in CustomerKey.objects.exclude(master_key_id=ring.active_id).order_by("pk").iterator():
        try:
            record.wrapped_key = wrapping.rewrap(ring, record.wrapped_key)
        except WrappedKeyError as error:
            report.failures.append(f"customer key {record.pk} ({record}): the wrapped key {error}")
            continue
        record.master_key_id = ring.active_id
        record.save(update_fields=["wrapped_key", "master_key_id"])
        report.customer_keys_rewrapped += 1


def rotate_master_key(*, rewrap_only: bool = False, remove_old: bool = False) -> RotationReport:
    """Add a new active master key (unless `rewrap_only`), re-wrap everything
    with the active key, and with `remove_old` drop the old master keys that
    nothing uses any more. Rows that cannot be re-wrapped are reported in
    `failures`, and the old keys they need are kept."""
    source = key_source()
    if source.kind != "file" or source.path is None:
        raise MasterKeyError(
            "The master key comes from FLOWPORT_MASTER_KEY; rotation needs a key file "
            "(FLOWPORT_MASTER_KEY_FILE) it can rewrite."
        )
    ring = get_ring()
    if not rewrap_only:
        ring = ring.with_new_active_key()
        write_ring_file(source.path, ring)
        logger.info("master key %s added to %s and made active", ring.active_id, source.path)
    report = RotationReport(active_id=ring.active_id, added=not rewrap_only)
    _rewrap_customer_keys(ring, report)
    for holder in _holders:
        rewrapped = holder.rewrap(ring, report.failures)
        if holder.name == "flows":
            report.flows_rewrapped += rewrapped
    if remove_old:
        used = master_keys_in_use()
        old = set(ring.keys) - {ring.active_id}
        report.still_used = {key_id: used[key_id] for key_id in sorted(old) if used[key_id]}
        removable = old - set(report.still_used)
        if removable:
            write_ring_file(source.path, ring.without(removable))
            report.removed = sorted(removable)
            logger.info("master keys %s removed from %s", ", ".join(report.removed), source.path)
    logger.info(
        "master key rotation: active %s, %d customer keys and %d flows re-wrapped, %d failures",
        report.active_id,
        report.customer_keys_rewrapped,
        report.flows_rewrapped,
        len(report.failures),
    )
    return report
