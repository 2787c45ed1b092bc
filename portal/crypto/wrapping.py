"""Customer keys wrapped (AES-256-GCM) under a master key.

Envelope (version 1), base64 text:
    0x01 | id length (1 byte) | master key id (ASCII) | master key check (4 bytes)
    | nonce (12 bytes) | encrypted customer key (32 bytes) + tag (16 bytes)
Everything before the nonce is authenticated. The master key check (first
4 bytes of the master key's fingerprint) tells "this portal's key with that id
is a different key" apart from "the wrapped key was changed".
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from portal.crypto import client
from portal.crypto.errors import WrappedKeyError
from portal.crypto.master import KEY_ID, MasterKeyRing

VERSION = 1
_AAD = b"flowport/wrapped-key/v1"
_SEALED_BYTES = client.KEY_BYTES + client.TAG_BYTES


@dataclass(frozen=True)
class WrappedKey:
    master_key_id: str
    master_key_check: bytes
    header: bytes
    nonce: bytes
    sealed: bytes


def parse(text: str) -> WrappedKey:
    """The envelope's parts; WrappedKeyError(malformed_wrapped_key) if it is not one."""

    def malformed(reason: str) -> WrappedKeyError:
        return WrappedKeyError(f"is not a wrapped key: {reason}", code="malformed_wrapped_key")

    if not isinstance(text, str) or not text.strip():
        raise malformed("it is empty")
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise malformed("it is not base64") from None
    if not raw or raw[0] != VERSION:
        raise malformed(f"unknown format version {raw[0] if raw else 'none'}")
    if len(raw) < 2:
        raise malformed("it is too short")
    id_end = 2 + raw[1]
    header_end = id_end + client.CHECK_BYTES
    if len(raw) != header_end + client.NONCE_BYTES + _SEALED_BYTES:
        raise malformed("it has the wrong length")
    try:
        master_key_id = raw[2:id_end].decode("ascii")
    except UnicodeDecodeError:
        raise malformed("its master key id is not ASCII") from None
    if not KEY_ID.match(master_key_id):
        raise malformed("its master key id is not valid")
    return WrappedKey(
        master_key_id=master_key_id,
        master_key_check=raw[id_end:header_end],
        header=raw[:header_end],
        nonce=raw[header_end : header_end + client.NONCE_BYTES],
        sealed=raw[header_end + client.NONCE_BYTES :],
    )


def wrap(ring: MasterKeyRing, customer_key: bytes) -> str:
    """`customer_key` (32 bytes) wrapped with the ring's active master key."""
    if len(customer_key) != client.KEY_BYTES:
        raise ValueError("A customer key is 32 bytes (AES-256).")
    key_id = ring.active_id.encode("ascii")
    header = bytes([VERSION, len(key_id)]) + key_id + client.key_check(ring.active_key)
    nonce = os.urandom(client.NONCE_BYTES)
    sealed = AESGCM(ring.active_key).encrypt(nonce, customer_key, _AAD + header)
    return base64.b64encode(header + nonce + sealed).decode("ascii")


def unwrap(ring: MasterKeyRing, text: str) -> bytes:
    """The customer key inside a wrapped key. WrappedKeyError codes:
    malformed_wrapped_key, unknown_master_key, wrong_master_key, tampered_wrapped_key."""
    wrapped = parse(text)
    master_key = ring.get(wrapped.master_key_id)
    if master_key is None:
        raise WrappedKeyError(
            f"was wrapped with master key {wrapped.master_key_id!r}, which this portal does not have "
            "(removed by a rotation, or made by another portal)",
            code="unknown_master_key",
        )
    if not hmac.compare_digest(wrapped.master_key_check, client.key_check(master_key)):
        raise WrappedKeyError(
            f"was wrapped with a different key than this portal's master key {wrapped.master_key_id!r} "
            "(the master key file was replaced?)",
            code="wrong_master_key",
        )
    try:
        return AESGCM(master_key).decrypt(wrapped.nonce, wrapped.sealed, _AAD + wrapped.header)
    except InvalidTag:
        raise WrappedKeyError(
            "failed its integrity check: the wrapped key was changed or corrupted",
            code="tampered_wrapped_key",
        ) from None


def rewrap(ring: MasterKeyRing, text: str) -> str:
    """The same customer key wrapped again with the active master key."""
    return wrap(ring, unwrap(ring, text))
