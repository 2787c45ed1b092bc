"""Values the portal itself must read back but no one may read in its database: a subscriber's
webhook URL, whose path is often the token of a chat tool's incoming webhook. Each value gets a
data key of its own, wrapped by the master key like a customer key (wrapping.py), so a master
key rotation re-wraps the small data key and never touches the value.

Format: ``SEALED:<wrapped data key>:<ENC(...) of the value under the data key>``. The ENC part
names its key by a check of it (client.key_check), so the halves of two sealed values do not
fit together. Pure functions of a MasterKeyRing: no Django."""

from __future__ import annotations

import os

from portal.crypto import client, wrapping
from portal.crypto.errors import WrappedKeyError
from portal.crypto.master import MasterKeyRing

PREFIX = "SEALED:"


def is_sealed(value: object) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def _halves(text: str) -> tuple[str, str]:
    wrapped, colon, encrypted = text[len(PREFIX) :].partition(":")
    if not is_sealed(text) or not colon or not wrapped or not encrypted:
        raise WrappedKeyError("is not a sealed value", code="malformed_wrapped_key")
    return wrapped, encrypted


def seal(ring: MasterKeyRing, plaintext: str) -> str:
    data_key = os.urandom(client.KEY_BYTES)
    return f"{PREFIX}{wrapping.wrap(ring, data_key)}:{client.encrypt(data_key, plaintext)}"


def unseal(ring: MasterKeyRing, text: str) -> str:
    """The value; WrappedKeyError when the data key cannot be unwrapped, EncryptedValueError when
    the value was changed or does not belong to that data key."""
    wrapped, encrypted = _halves(text)
    return client.decrypt(wrapping.unwrap(ring, wrapped), encrypted)


def reseal(ring: MasterKeyRing, text: str) -> str:
    """The same sealed value with its data key wrapped again by the active master key."""
    wrapped, encrypted = _halves(text)
    return f"{PREFIX}{wrapping.rewrap(ring, wrapped)}:{encrypted}"


def master_key_id(text: str) -> str | None:
    """Which master key wraps the value's data key; None for text that is not a sealed value."""
    try:
        return wrapping.parse(_halves(text)[0]).master_key_id
    except WrappedKeyError:
        return None
