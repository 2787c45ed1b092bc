"""Binding the `ENC(...)` values made before owner binding (format version 1)
to their key's owner: each is decrypted in memory and encrypted again, bound
to the owner the flow owner holds the key through (`services.binding_for`).
Run once after upgrading (`manage.py bind_secrets`); running it again changes
nothing. The flow catalog's (it rewrites flows through flows.services), with
the keys app's crypto. A version 1 value decrypts in any flow whose owner holds its key —
with a key shared by a group, in every member's flows — so until it is bound
it is its key's, not its owner's."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError

from portal.crypto import client, wrapping
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, encrypted_keys, wrapped_key_property_for
from portal.crypto.errors import EncryptionError
from portal.crypto.master import get_ring
from portal.flows import services as flow_services
from portal.flows.models import FlowConfig
from portal.keys.services import binding_for

logger = logging.getLogger(__name__)


@dataclass
class BindReport:
    flows_bound: int = 0
    values_bound: int = 0
    failures: list[str] = field(default_factory=list)


def _bound_properties(flow, report: BindReport) -> dict[str, str] | None:
    """The flow's properties with each version 1 value bound, or None when
    there is none (or one cannot be bound: reported, the flow untouched)."""
    properties = dict(flow.properties)
    legacy = [
        name
        for name in encrypted_keys(properties)
        if client.is_encrypted(properties[name]) and client.owner_of(properties[name]) is None
    ]
    if not legacy:
        return None
    ring = get_ring()
    for name in legacy:
        wrapped = properties.get(wrapped_key_property_for(name, properties))
        try:
            owner = binding_for(flow.owner, wrapped or "")
            key = wrapping.unwrap(ring, wrapped or "")
            properties[name] = client.encrypt(key, client.decrypt(key, properties[name]), owner)
        except (EncryptionError, client.EncryptedValueError) as error:
            report.failures.append(f"flow {flow}: {name!r} not bound: {error}")
            return None
    report.values_bound += len(legacy)
    return properties


def bind_legacy_values() -> BindReport:
    """Bind every flow's version 1 values (see the module docstring)."""
    report = BindReport()
    flows = FlowConfig.objects.filter(properties__has_key=WRAPPED_KEY_PROPERTY).select_related("owner")
    for flow in flows.order_by("pk").iterator():
        properties = _bound_properties(flow, report)
        if properties is None:
            continue
        try:
            # Through the catalog service, so the compiler sees the change.
            flow_services.replace_secrets(flow, properties)
        except ValidationError as error:
            report.failures.append(f"flow {flow}: not bound: {'; '.join(error.messages)}")
            continue
        report.flows_bound += 1
    logger.info(
        "ENC values bound: %d value(s) in %d flow(s), %d failure(s)",
        report.values_bound,
        report.flows_bound,
        len(report.failures),
    )
    return report
