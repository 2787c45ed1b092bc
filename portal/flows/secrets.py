"""A flow's secrets, through the keys app.

On save: what its templates declare encrypted is not given in clear, a key
named like a secret holds an ENC(...) value, and the wrapped customer keys
and the owners ENC(...) values are bound to are the flow owner's
(keys.services.wrapped_key_problems, owner_problems). Called by
flows.services.validate_flow before anything is written; the API answers
400, the form shows it beside the properties.

In the form: a secret typed in clear is encrypted with the flow's customer
key before the flow is validated (SecretEncrypter), so no plaintext reaches
the database."""

from __future__ import annotations

import logging

from django.core.exceptions import ValidationError

from portal.accounts.access import Principal
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, looks_encrypted
from portal.flows.compiler.templates import (
    clear_encrypted_attributes,
    clear_message,
    declared_encrypted_attributes,
)
from portal.flows.models import FlowConfig
from portal.keys.models import CustomerKey
from portal.keys.services import (
    EncryptionError,
    MasterKeyError,
    binding_for,
    encrypt_value,
    owner_problems,
    wrapped_key_problems,
)
from portal.pipeline.columnrules import needs_key
from portal.pipeline.propertyrules import clear_secret_keys, clear_secret_message

logger = logging.getLogger(__name__)


def validate_flow_secrets(flow: FlowConfig, declared: set[str] | None = None) -> None:
    """What a flow's save needs beyond the form of its values (that is in
    flows.validators). ValidationError({"properties": [...]}) naming each
    property. `declared`: the attributes the flow and its templates declare
    encrypted, when the caller resolved them already (Resolution.encrypted_attributes)."""
    owner = getattr(flow, "owner", None)
    properties = flow.properties
    if declared is None:
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


NEEDS_CUSTOMER_KEY = "secret properties need a customer key; create one under Keys"


def customer_key_for(owner: Principal | None, flow_properties: dict[str, str] | None = None) -> str | None:
    """The wrapped customer key a flow's new secrets are encrypted with: the
    one the flow already carries (every ENC value of a flow shares one key),
    else the owner's newest own key, else their groups' newest."""

    existing = (flow_properties or {}).get(WRAPPED_KEY_PROPERTY)
    if existing:
        return existing
    keys = CustomerKey.objects.usable_by(owner)
    key = keys.filter(owner_user=owner).first() or keys.first()
    return key.wrapped_key if key is not None else None


def with_column_rules_key(
    owner: Principal | None, properties: dict[str, str], stored: dict[str, str] | None = None
) -> dict[str, str]:
    """The properties with the owner's wrapped customer key added when their column rules need
    it (columns.encrypt, or columns.hash without its own salt) and they carry none: the form,
    the API and Rest.li all save through here, so a flow means the same whichever path wrote it.
    Without a key the properties are returned as they are, and the save's check says to add one."""
    if owner is None or WRAPPED_KEY_PROPERTY in properties or not needs_key(properties):
        return properties
    wrapped = customer_key_for(owner, stored)
    return {**properties, WRAPPED_KEY_PROPERTY: wrapped} if wrapped else properties


class SecretEncrypter:
    """Encrypts a flow's new secret values with the keys app
    (`portal.keys.services.encrypt_value`); `wrapped_key` is what the flow's
    `encrypt.wrapped.key` property must then hold. Errors are
    ValidationErrors whose text names no key and no plaintext."""

    def __init__(self, owner: Principal | None, flow_properties: dict[str, str] | None = None) -> None:
        self.owner = owner
        self.flow_properties = flow_properties or {}
        self._wrapped_key: str | None = None

    @property
    def wrapped_key(self) -> str:
        if self._wrapped_key is None:
            wrapped = customer_key_for(self.owner, self.flow_properties) if self.owner is not None else None
            if not wrapped:
                raise ValidationError(NEEDS_CUSTOMER_KEY, code="no_customer_key")
            self._wrapped_key = wrapped
        return self._wrapped_key

    def encrypt(self, plaintext: str) -> str:
        try:
            return encrypt_value(self.wrapped_key, plaintext, binding_for(self.owner, self.wrapped_key))
        except MasterKeyError as error:
            logger.error("master key unavailable while encrypting a flow secret: %s", error)
            raise ValidationError(
                "Secret values cannot be encrypted now: the portal's master key is not available; "
                "an administrator must fix it.",
                code=error.code,
            ) from None
        except EncryptionError as error:
            raise ValidationError(f"A secret value cannot be encrypted: {error}", code=error.code) from None
