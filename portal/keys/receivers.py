"""Catalog listener (connected in KeysConfig.ready): a flow save is refused
when its secrets are not in order. Raising inside the saving transaction
rolls the save back, and flows.services turns the ValidationError into a 400
(API) or a form error (pages)."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from portal.flows.signals import flow_catalog_changed


@receiver(flow_catalog_changed, dispatch_uid="keys.validate_flow_secrets")
def validate_flow_secrets_on_change(sender: Any, action: str, flow: Any, **kwargs: Any) -> None:
    if action in ("add", "update"):
        from portal.keys.services import validate_flow_secrets

        validate_flow_secrets(flow)
