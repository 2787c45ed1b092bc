"""Customer-side encryption of job property values: `ENC(<base64>)`.

Standalone on purpose: this file needs only the Python standard library and
`cryptography`, never Django or the portal, so customers encrypt secrets on
their own machine with their own key (copy this one file if you like). The
portal uses the very same functions, so both sides always agree on the format.

    python -m portal.crypto.client generate-key --out my.key     # 32 random bytes, base64, mode 0600
    printf '%s' "$DB_PASSWORD" | python -m portal.crypto.client encrypt --key-file my.key
    ENC(AQx4...)
    printf '%s' 'ENC(AQx4...)' | python -m portal.crypto.client decrypt --key-file my.key

From Python: `encrypt(load_key(text), "s3cret") -> "ENC(...)"`.

Format (version 2), base64 inside `ENC(...)`:
    0x02 | key check (4 bytes) | owner length (1 byte) | owner (ASCII)
    | nonce (12 bytes) | AES-256-GCM ciphertext + tag (16 bytes)
The key check is the first 4 bytes of `key_fingerprint(key)`: it tells a value
encrypted with another key apart from a tampered one. The owner is the
customer key's owner as the portal names it (`user:<id>` or `group:<id>`,
listed with the key): the portal decrypts the value only in a flow that owner
owns. Everything before the nonce is authenticated (GCM associated data), so
the owner cannot be changed without the value failing its integrity check.

    printf '%s' "$DB_PASSWORD" | python -m portal.crypto.client encrypt --key-file my.key --owner user:17

Version 1 (no owner: `0x01 | key check | nonce | ciphertext + tag`) is still
read; the portal accepts it only in flows whose owner holds the key.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import hmac
import os
import re
import sys
from typing import TypeGuard

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12
TAG_BYTES = 16
CHECK_BYTES = 4
VERSION = 2
LEGACY_VERSION = 1  # no owner binding
# Values must fit a flow property (64 KiB) once encrypted and base64-encoded.
MAX_PLAINTEXT_BYTES = 32 * 1024
PREFIX, SUFFIX = "ENC(", ")"
_AAD = {LEGACY_VERSION: b"flowport/enc/v1", VERSION: b"flowport/enc/v2"}
_FINGERPRINT_INFO = b"flowport/key-fingerprint"
_HEADER = 1 + CHECK_BYTES
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}\Z")
OWNER = re.compile(r"(user|group):[1-9][0-9]{0,18}\Z")


class EncryptedValueError(ValueError):
    """A key or an ENC(...) value that cannot be used. `code` says why; the
    message never contains the key or the plaintext."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


def generate_key() -> bytes:
    return os.urandom(KEY_BYTES)


def encode_key(key: bytes) -> str:
    return base64.b64encode(key).decode("ascii")


def load_key(text: str | bytes) -> bytes:
    """A base64 (standard or URL-safe) AES-256 key → its 32 bytes."""
    if isinstance(text, bytes):
        try:
            text = text.decode("ascii")
        except UnicodeDecodeError:
            raise EncryptedValueError("malformed_key", "The key is not base64 text.") from None
    cleaned = "".join(text.split()).replace("-", "+").replace("_", "/")
    if not cleaned:
        raise EncryptedValueError("malformed_key", "The key is empty.")
    try:
        key = base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise EncryptedValueError("malformed_key", "The key is not valid base64.") from None
    if len(key) != KEY_BYTES:
        raise EncryptedValueError(
            "malformed_key", f"The key must be {KEY_BYTES} bytes (AES-256); this one has {len(key)}."
        )
    return key


def key_fingerprint(key: bytes) -> str:
    """A one-way identifier of a key (hex HMAC-SHA256): safe to store and show."""
    return hmac.new(key, _FINGERPRINT_INFO, hashlib.sha256).hexdigest()


def key_check(key: bytes) -> bytes:
    return bytes.fromhex(key_fingerprint(key))[:CHECK_BYTES]


def looks_encrypted(value: object) -> TypeGuard[str]:
    """Meant to be ciphertext (starts with `ENC(`), well-formed or not."""
    return isinstance(value, str) and value.startswith(PREFIX)


def parse(value: str) -> tuple[bytes, bytes, bytes, bytes]:
    """(header, key check, nonce, ciphertext) of a well-formed ENC(...) value."""
    header, check, _owner, nonce, ciphertext = _parts(value)
    return header, check, nonce, ciphertext


def owner_of(value: str) -> str | None:
    """The owner a well-formed ENC(...) value is bound to (`user:<id>`,
    `group:<id>`), or None for a version 1 value (bound to no one)."""
    return _parts(value)[2]


def _parts(value: str) -> tuple[bytes, bytes, str | None, bytes, bytes]:
    if not looks_encrypted(value) or not value.endswith(SUFFIX):
        raise EncryptedValueError("malformed_value", "write it as ENC(<base64>)")
    body = value[len(PREFIX) : -len(SUFFIX)]
    if not _BASE64.match(body) or len(body) % 4:
        raise EncryptedValueError("malformed_value", "the text inside ENC(...) is not base64")
    raw = base64.b64decode(body)
    version = raw[0] if raw else None
    if version not in _AAD:
        raise EncryptedValueError("malformed_value", f"unknown format version {version or 'none'}")
    end, owner = _HEADER, None
    if version == VERSION:
        if len(raw) < _HEADER + 1:
            raise EncryptedValueError("malformed_value", "too short to be an encrypted value")
        end = _HEADER + 1 + raw[_HEADER]
        owner = raw[_HEADER + 1 : end].decode("ascii", errors="replace")
        if not OWNER.match(owner):
            raise EncryptedValueError("malformed_value", "its owner is not user:<id> or group:<id>")
    if len(raw) < end + NONCE_BYTES + TAG_BYTES:
        raise EncryptedValueError("malformed_value", "too short to be an encrypted value")
    header = raw[:end]
    return header, header[1:_HEADER], owner, raw[end : end + NONCE_BYTES], raw[end + NONCE_BYTES :]


def is_encrypted(value: object) -> bool:
    """A well-formed ENC(...) value (format only: nothing is decrypted)."""
    if not looks_encrypted(value):
        return False
    try:
        parse(value)
    except EncryptedValueError:
        return False
    return True


def encrypt(key: bytes, plaintext: str, owner: str | None = None) -> str:
    """`plaintext` encrypted with the customer `key` (32 bytes) as ENC(...),
    bound to the key's `owner` (`user:<id>` or `group:<id>`, as the portal
    lists it). Without an owner: version 1, which the portal accepts only in
    flows whose owner holds the key."""
    if len(key) != KEY_BYTES:
        raise EncryptedValueError("malformed_key", f"The key must be {KEY_BYTES} bytes (AES-256).")
    data = plaintext.encode("utf-8")
    if len(data) > MAX_PLAINTEXT_BYTES:
        raise EncryptedValueError(
            "too_long", f"The value is longer than {MAX_PLAINTEXT_BYTES} bytes (UTF-8)."
        )
    if owner is None:
        header = bytes([LEGACY_VERSION]) + key_check(key)
    elif OWNER.match(owner):
        header = bytes([VERSION]) + key_check(key) + bytes([len(owner)]) + owner.encode("ascii")
    else:
        raise EncryptedValueError("malformed_owner", "The owner must be user:<id> or group:<id>.")
    nonce = os.urandom(NONCE_BYTES)
    ciphertext = AESGCM(key).encrypt(nonce, data, _AAD[header[0]] + header)
    return PREFIX + base64.b64encode(header + nonce + ciphertext).decode("ascii") + SUFFIX


def decrypt(key: bytes, value: str) -> str:
    """The plaintext of an ENC(...) value; EncryptedValueError with code
    malformed_value, wrong_key, tampered or not_text otherwise. Whether the
    owner it is bound to may use it (`owner_of`) is the portal's to check."""
    header, check, nonce, ciphertext = parse(value)
    if not hmac.compare_digest(check, key_check(key)):
        raise EncryptedValueError("wrong_key", "it was encrypted with a different key")
    try:
        data = AESGCM(key).decrypt(nonce, ciphertext, _AAD[header[0]] + header)
    except InvalidTag:
        raise EncryptedValueError(
            "tampered", "it failed its integrity check: the ciphertext was changed or corrupted"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise EncryptedValueError("not_text", "it decrypts to bytes that are not UTF-8 text") from None


# --- command line ------------------------------------------------------------------


def _read_key_file(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return load_key(handle.read())
    except OSError as error:
        raise SystemExit(f"cannot read key file {path}: {error.strerror}") from None
    except EncryptedValueError as error:
        raise SystemExit(f"{path}: {error}") from None


def _stdin_text() -> str:
    text = sys.stdin.read()
    # `echo secret |` adds a newline that is not part of the secret.
    return text[:-1] if text.endswith("\n") else text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m portal.crypto.client",
        description="Encrypt job property values with your own key, as Flowport's ENC(...) form.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    generate = commands.add_parser("generate-key", help="a new random AES-256 key, base64")
    generate.add_argument("--out", help="write it to this new file (mode 0600) instead of stdout")
    for name, text in (
        ("encrypt", "plaintext on stdin → ENC(...) on stdout (one trailing newline is dropped)"),
        ("decrypt", "ENC(...) on stdin → plaintext on stdout"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("--key-file", required=True, help="file holding your base64 key")
        if name == "encrypt":
            command.add_argument(
                "--owner",
                help="the key's owner as the portal lists it (user:<id> or group:<id>): the value "
                "then decrypts only in that owner's flows",
            )
    fingerprint = commands.add_parser("fingerprint", help="the key's fingerprint, as the portal lists it")
    fingerprint.add_argument("--key-file", required=True)
    args = parser.parse_args(argv)

    try:
        if args.command == "generate-key":
            text = encode_key(generate_key()) + "\n"
            if args.out:
                try:
                    fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                except OSError as error:
                    raise SystemExit(f"cannot create {args.out}: {error.strerror}") from None
                with os.fdopen(fd, "w") as handle:
                    handle.write(text)
            else:
                sys.stdout.write(text)
        elif args.command == "encrypt":
            sys.stdout.write(encrypt(_read_key_file(args.key_file), _stdin_text(), args.owner) + "\n")
        elif args.command == "decrypt":
            sys.stdout.write(decrypt(_read_key_file(args.key_file), sys.stdin.read().strip()))
        else:
            sys.stdout.write(key_fingerprint(_read_key_file(args.key_file))[:16] + "\n")
    except EncryptedValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
