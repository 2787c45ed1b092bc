"""Encrypted job properties: `ENC(...)` values under the customer key that
the property `encrypt.wrapped.key` carries, wrapped by the master key.

No Django models here: flow validators import the format checks, and the
worker calls `decrypt_properties` just before it hands properties to the
pipeline.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from portal.crypto import client, wrapping
from portal.crypto.errors import DecryptionError, MasterKeyError, WrappedKeyError
from portal.crypto.master import MasterKeyRing, get_ring
from portal.crypto.secretnames import ENCRYPTED_ATTRIBUTES_KEY, listed, names_secret
from portal.crypto.secretnames import secret_keys as hidden_keys

WRAPPED_KEY_PROPERTY = "encrypt.wrapped.key"
ENCRYPTED_MASK = "ENC(…)"
REDACTED = "********"
# Where the worker decrypts an ENC(...) value (`holds_secret`): a key named like a secret
# (`names_secret`), or the user half of a credential (`source.conn.username`, a node's
# `sasl.username`), which Gobblin encrypts like the password.
CREDENTIAL_USER_WORDS = frozenset({"user", "username", "login"})
# The pipeline's own key families (portal/pipeline/propertyrules.py): declared encrypted or not, a key
# there is a setting or a name that the job's progress, events or pages may show.
PIPELINE_FAMILIES = (
    "source.",
    "extract.",
    "converter.",
    "qualitychecker.",
    "fork.",
    "writer.",
    "data.publisher.",
    "dataset.",
    "job.",
    "flow.",
    "flowport.",
    "spark.",
    "task.",
    "gobblin.",
)
_WORDS = re.compile(r"[._\-\s]+")
_BRANCH = re.compile(r"\.\d+\Z")

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


def holds_secret(key: str, declared: Iterable[str] = ()) -> bool:
    """Whether `key` may carry an ENC(...) value that the worker decrypts: a key named like a
    secret, the user half of a credential, or one `declared` encrypted
    (`gobblin.template.encrypted_attributes`) outside the pipeline's key families (a template
    attribute such as `db.credentials`).

    The pipeline's other keys show their values: a dataset or table name in the job's progress,
    events and pages, a setting in its log. Decrypted there, another's secret (a group's ENC
    value that a member may use but not read) would be read back in clear, so it stays sealed."""
    base = _BRANCH.sub("", key)
    if names_secret(base) or _WORDS.split(base.lower())[-1] in CREDENTIAL_USER_WORDS:
        return True
    return key in set(declared) and not base.startswith(PIPELINE_FAMILIES)


def sealed_keys(properties: Mapping[str, object]) -> list[str]:
    """The keys holding ENC(...) values that hold no secret (`holds_secret`, with the keys the
    properties declare encrypted): refused at save, left sealed by `decrypt_properties`."""
    declared = listed(properties.get(ENCRYPTED_ATTRIBUTES_KEY))
    return [key for key in encrypted_keys(properties) if not holds_secret(key, declared)]


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
    """A copy of `properties` with every ENC(...) value of a secret decrypted
    (`holds_secret`; any other stays sealed, as it was): the wrapped key in
    `encrypt.wrapped.key` is unwrapped with the master key (the portal's
    ring unless `ring` is given), then each value with it.

    Raises DecryptionError naming the property (never a key or plaintext);
    its `code` is one of missing_wrapped_key, master_key_unavailable,
    malformed_wrapped_key, unknown_master_key, wrong_master_key,
    tampered_wrapped_key, malformed_value, wrong_customer_key,
    tampered_value, not_text.
    """
    result = dict(properties)
    by_scope: dict[str, list[str]] = {}
    sealed = set(sealed_keys(properties))
    for key in (key for key in encrypted_keys(properties) if key not in sealed):
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


def unwrap_flow_key(
    properties: Mapping[str, str], needed_by: str, *, ring: MasterKeyRing | None = None
) -> bytes | None:
    """The flow owner's customer key, unwrapped from `encrypt.wrapped.key` (None when the flow
    carries none), for a pipeline feature that works under it (`needed_by` names it in errors:
    the column rules). For the worker's memory only. DecryptionError as `decrypt_properties`."""
    if not properties.get(WRAPPED_KEY_PROPERTY):
        return None
    return _unwrap_for(properties, WRAPPED_KEY_PROPERTY, needed_by, ring)


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


def _unwrap_for(
    properties: Mapping[str, str], wrapped_property: str, first_key: str, ring: MasterKeyRing | None
) -> bytes:
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
    and of keys named like secrets (`names_secret`) become `********`.

    Redact the properties as stored (before `decrypt_properties`): afterwards
    a decrypted value no longer looks encrypted — or pass
    `secret_keys=encrypted_keys(original)`."""
    secret = hidden_keys(properties, secret_keys)
    redacted = {}
    for key, value in properties.items():
        if looks_encrypted(value):
            redacted[key] = ENCRYPTED_MASK
        elif value and key in secret:
            redacted[key] = REDACTED
        else:
            redacted[key] = value
    return redacted


def secret_values(properties: Mapping[str, str], decrypted: Mapping[str, str]) -> set[str]:
    """The plaintexts no log or message may show: the decrypted value of every
    property `redact` masks in `properties` (as stored)."""
    shown = redact(properties)
    return {
        decrypted[k]
        for k, v in shown.items()
        if v != properties[k] and decrypted.get(k) and decrypted[k] != properties[k]  # not sealed
    }
