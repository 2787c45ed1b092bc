"""Exceptions of the keys app. Every message is safe to show and log: it may
name a property key, a master key id or a file, never a key or a plaintext."""

from __future__ import annotations


class EncryptionError(Exception):
    """Base class; `code` is a stable machine-readable reason."""

    code = "encryption_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(message)


class MasterKeyError(EncryptionError):
    """The portal's master key is missing, unreadable, malformed or its file
    is readable by others (permissions wider than 0600)."""

    code = "master_key_unavailable"


class WrappedKeyError(EncryptionError):
    """A wrapped customer key that cannot be unwrapped. Codes:
    `malformed_wrapped_key`, `unknown_master_key`, `wrong_master_key`,
    `tampered_wrapped_key`."""


class DecryptionError(EncryptionError):
    """`decrypt_properties` could not decrypt the properties. The message
    starts with the property key it is about; `property_key` holds it."""

    def __init__(self, property_key: str, reason: str, *, code: str) -> None:
        self.property_key = property_key
        self.reason = reason
        super().__init__(f"{property_key!r} {reason}", code=code)
