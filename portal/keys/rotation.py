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
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError

from portal.keys import wrapping
from portal.keys.errors import MasterKeyError, WrappedKeyError
from portal.keys.master import MasterKeyRing, get_ring, key_source, write_ring_file
from portal.keys.models import CustomerKey
from portal.keys.properties import WRAPPED_KEY_PROPERTY

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


def _flows_with_wrapped_keys():
    from portal.flows.models import FlowConfig

    return FlowConfig.objects.filter(properties__has_key=WRAPPED_KEY_PROPERTY)


def master_keys_in_use() -> Counter:
    """Master key id → how many customer keys and flows are wrapped with it."""
    used = Counter(CustomerKey.objects.values_list("master_key_id", flat=True))
    for flow in _flows_with_wrapped_keys().only("properties"):
        try:
            used[wrapping.parse(flow.properties[WRAPPED_KEY_PROPERTY]).master_key_id] += 1
        except WrappedKeyError:
            continue  # not unwrappable with any key: it keeps no master key in use
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


def _rewrap_flows(ring: MasterKeyRing, report: RotationReport) -> None:
    from portal.flows import services as flow_services

    for flow in _flows_with_wrapped_keys().select_related("owner").order_by("pk"):
        wrapped = flow.properties[WRAPPED_KEY_PROPERTY]
        try:
            if wrapping.parse(wrapped).master_key_id == ring.active_id:
                continue
            rewrapped = wrapping.rewrap(ring, wrapped)
        except WrappedKeyError as error:
            report.failures.append(f"flow {flow}: {WRAPPED_KEY_PROPERTY} {error}")
            continue
        try:
            # Through the catalog service, so listeners (compiler, scheduler) see the change.
            flow_services.update_flow(
                flow, data={"properties": {**flow.properties, WRAPPED_KEY_PROPERTY: rewrapped}}
            )
        except ValidationError as error:
            report.failures.append(f"flow {flow}: not re-wrapped: {'; '.join(error.messages)}")
            continue
        report.flows_rewrapped += 1


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
    _rewrap_flows(ring, report)
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
