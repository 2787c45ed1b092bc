"""A flow's secrets on save: what its templates declare encrypted is not
given in clear, a key named like a secret holds an ENC(...) value, and the
wrapped customer keys and the owners ENC(...) values are bound to are the
flow owner's (keys.services.wrapped_key_problems, owner_problems).
Called by the flow-save listener (flows.receivers) inside the saving
transaction; flows.services turns the ValidationError into a 400 (API) or a
form error (pages)."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from portal.flows.compiler.templates import (
    clear_encrypted_attributes,
    clear_message,
    declared_encrypted_attributes,
)
from portal.keys.properties import looks_encrypted
from portal.keys.services import owner_problems, wrapped_key_problems
from portal.pipeline.schema import clear_secret_keys, clear_secret_message


def validate_flow_secrets(flow) -> None:
    """What a flow's save needs beyond the form of its values (that is in
    flows.validators). ValidationError({"properties": [...]}) naming each
    property."""
    owner = getattr(flow, "owner", None)
    properties = flow.properties
    declared = declared_encrypted_attributes(flow, owner)
    messages = [clear_message(name) for name in clear_encrypted_attributes(flow, owner, declared)]
    # A key named like a secret is one, whatever a template declares (docs/security.md).
    messages += [
        clear_secret_message(name)
        for name in clear_secret_keys(properties, looks_encrypted)
        if name not in declared
    ]
    messages += wrapped_key_problems(owner, properties)
    # ENC(...) values bound (AEAD) to another owner decrypt only in that owner's flows.
    messages += owner_problems(owner, properties)
    if messages:
        raise ValidationError({"properties": messages})
