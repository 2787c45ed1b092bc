"""Encrypted job properties: `ENC(...)` values under the customer key that
the property `encrypt.wrapped.key` carries, wrapped by the master key.

No Django models here: flow validators import the format checks, and the
worker calls `decrypt_properties` just before it hands properties to the
pipeline.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from portal.keys import client, wrapping
from portal.keys.errors import DecryptionError, MasterKeyError, WrappedKeyError
from portal.keys.master import MasterKeyRing, get_ring

WRAPPED_KEY_PROPERTY = "encrypt.wrapped.key"
ENCRYPTED_ATTRIBUTES_KEY = "gobblin.template.encrypted_attributes"
ENCRYPTED_MASK = "ENC(…)"
REDACTED = "********"
# Property names that hold secrets whatever a template says (the same words
# the topology app refuses in clear in data node properties).
SECRET_NAME = re.compile(r"(pass(word|wd)?|secret|token|credential|private[._-]?key|api[._-]?key)", re.I)

is_encrypted = client.is_encrypted
looks_encrypted = client.looks_encrypted

_VALUE_ERRORS = {
    "wrong_key": (
        "wrong_customer_key",
        f"was encrypted with a different customer key than the one in {WRAPPED_KEY_PROPERTY!r}",
    ),
    "tampered": ("tampered_value", "failed its integrity check: the ENC(...) value was changed or corrupted"),
    "not_text": ("not_text", "decrypts to bytes that are not UTF-8 text"),
}


def listed(value: str | None) -> list[str]:
    """A comma list property (`a, b,c`) as names."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def encrypted_keys(properties: Mapping[str, object]) -> list[str]:
    return sorted(key for key, value in properties.items() if isinstance(key, str) and looks_encrypted(value))


def format_problems(properties: Mapping[str, object]) -> list[str]:
    """What is wrong with the *form* of a property map's ENC values and
    wrapped key, one message per problem, each naming its property. Nothing
    is decrypted and no master key is needed."""
    problems = []
    encrypted = encrypted_keys(properties)
    for key in encrypted:
        try:
            client.parse(str(properties[key]))  # text already: encrypted_keys picks ENC(...) strings
        except client.EncryptedValueError as error:
            problems.append(f"{key!r} is not a valid ENC(...) value: {error}.")
    wrapped = properties.get(WRAPPED_KEY_PROPERTY)
    if wrapped is None:
        if encrypted:
            names = ", ".join(repr(key) for key in encrypted)
            problems.append(
                f"{names} {'is' if len(encrypted) == 1 else 'are'} ENC(...) but there is no "
                f"{WRAPPED_KEY_PROPERTY!r} property with the wrapped customer key to decrypt "
                f"{'it' if len(encrypted) == 1 else 'them'}."
            )
    elif isinstance(wrapped, str):
        try:
            wrapping.parse(wrapped)
        except WrappedKeyError as error:
            problems.append(f"{WRAPPED_KEY_PROPERTY!r} {error}.")
    return problems


def decrypt_properties(properties: Mapping[str, str], *, ring: MasterKeyRing | None = None) -> dict[str, str]:
    """A copy of `properties` with every ENC(...) value decrypted: the
    wrapped key in `encrypt.wrapped.key` is unwrapped with the master key
    (the portal's ring unless `ring` is given), then each value with it.

    Raises DecryptionError naming the property (never a key or plaintext);
    its `code` is one of missing_wrapped_key, master_key_unavailable,
    malformed_wrapped_key, unknown_master_key, wrong_master_key,
    tampered_wrapped_key, malformed_value, wrong_customer_key,
    tampered_value, not_text.
    """
    result = dict(properties)
    by_scope: dict[str, list[str]] = {}
    for key in encrypted_keys(properties):
        by_scope.setdefault(wrapped_key_property_for(key, properties), []).append(key)
    for wrapped_property, keys in by_scope.items():
        customer_key = _unwrap_for(properties, wrapped_property, keys[0], ring)
        for key in keys:
            try:
                result[key] = client.decrypt(customer_key, properties[key])
            except client.EncryptedValueError as error:
                code, reason = _VALUE_ERRORS.get(
                    error.code, ("malformed_value", f"is not a valid ENC(...) value: {error}")
                )
                raise DecryptionError(key, reason, code=code) from None
    return result


def wrapped_key_property_for(key: str, properties: Mapping[str, str]) -> str:
    """The wrapped key that decrypts `key`: the nearest `<prefix>.encrypt.wrapped.key`
    whose prefix `key` starts with, else the flow's own `encrypt.wrapped.key`.
    A data node keeps its own wrapped key among its properties, so its secrets
    reach a job as `flowport.hop.source.password` beside
    `flowport.hop.source.encrypt.wrapped.key`."""
    parts = key.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        scoped = ".".join(parts[:cut]) + "." + WRAPPED_KEY_PROPERTY
        if properties.get(scoped):
            return scoped
    return WRAPPED_KEY_PROPERTY


def _unwrap_for(properties: Mapping[str, str], wrapped_property: str, first_key: str, ring) -> bytes:
    wrapped = properties.get(wrapped_property)
    if not wrapped:
        raise DecryptionError(
            first_key,
            f"is ENC(...) but there is no {wrapped_property!r} property to decrypt it with",
            code="missing_wrapped_key",
        )
    needed_by = f" (needed to decrypt {first_key!r})"
    try:
        return wrapping.unwrap(ring if ring is not None else get_ring(), wrapped)
    except MasterKeyError as error:
        raise DecryptionError(
            wrapped_property, f"cannot be unwrapped{needed_by}: {error}", code=error.code
        ) from None
    except WrappedKeyError as error:
        raise DecryptionError(wrapped_property, f"{error}{needed_by}", code=error.code) from None


def redact(properties: Mapping[str, str], secret_keys: Iterable[str] = ()) -> dict[str, str]:
    """A copy safe to show or log: ENC(...) values become `ENC(…)`; values of
    `secret_keys`, of the keys listed in `gobblin.template.encrypted_attributes`
    and of keys named like secrets (password, token, …) become `********`.

    Redact the properties as stored (before `decrypt_properties`): afterwards
    a decrypted value no longer looks encrypted — or pass
    `secret_keys=encrypted_keys(original)`."""
    secret = set(secret_keys) | set(listed(properties.get(ENCRYPTED_ATTRIBUTES_KEY)))
    redacted = {}
    for key, value in properties.items():
        if looks_encrypted(value):
            redacted[key] = ENCRYPTED_MASK
        elif value and (key in secret or SECRET_NAME.search(key)):
            redacted[key] = REDACTED
        else:
            redacted[key] = value
    return redacted


def secret_values(properties: Mapping[str, str], decrypted: Mapping[str, str]) -> set[str]:
    """The plaintexts no log or message may show: the decrypted value of every
    property `redact` masks in `properties` (as stored)."""
    shown = redact(properties)
    return {decrypted[k] for k, v in shown.items() if v != properties[k] and decrypted.get(k)}
