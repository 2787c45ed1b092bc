"""Flows keep wrapped customer keys (`encrypt.wrapped.key`): master key
rotation (keys.rotation) re-wraps them through the flow catalog service, so
listeners (compiler, scheduler) see the change. Registered with keys in
FlowsConfig.ready."""

from __future__ import annotations

from collections.abc import Iterator

from django.core.exceptions import ValidationError

from portal.crypto import wrapping
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY
from portal.crypto.errors import WrappedKeyError
from portal.crypto.master import MasterKeyRing
from portal.flows import services as flow_services
from portal.flows.models import FlowConfig
from portal.keys.rotation import WrappedKeyHolder


def _flows_with_wrapped_keys():
    return FlowConfig.objects.filter(properties__has_key=WRAPPED_KEY_PROPERTY)


def master_key_ids() -> Iterator[str]:
    for flow in _flows_with_wrapped_keys().only("properties"):
        try:
            yield wrapping.parse(flow.properties[WRAPPED_KEY_PROPERTY]).master_key_id
        except WrappedKeyError:
            continue  # not unwrappable with any key: it keeps no master key in use


def rewrap(ring: MasterKeyRing, failures: list[str]) -> int:
    count = 0
    for flow in _flows_with_wrapped_keys().select_related("owner").order_by("pk"):
        wrapped = flow.properties[WRAPPED_KEY_PROPERTY]
        try:
            if wrapping.parse(wrapped).master_key_id == ring.active_id:
                continue
            rewrapped = wrapping.rewrap(ring, wrapped)
        except WrappedKeyError as error:
            failures.append(f"flow {flow}: {WRAPPED_KEY_PROPERTY} {error}")
            continue
        try:
            # Through the catalog service, so the compiler sees the change.
            flow_services.replace_secrets(flow, {**flow.properties, WRAPPED_KEY_PROPERTY: rewrapped})
        except ValidationError as error:
            failures.append(f"flow {flow}: not re-wrapped: {'; '.join(error.messages)}")
            continue
        count += 1
    return count


HOLDER = WrappedKeyHolder(name="flows", master_key_ids=master_key_ids, rewrap=rewrap)
