"""Column rules: drop, hash or encrypt columns inside the job's one Spark pass.

Job-wide keys (the flow form's source picker sets them per column; a column takes one rule):

* ``columns.drop``: the columns are not delivered.
* ``columns.hash``: each value becomes the hex SHA-256 of ``salt + value`` (as text; NULL stays
  NULL).  The salt is ``columns.hash.secret`` (give it as ENC(...)); without one, a salt derived
  from the flow owner's customer key (``HMAC-SHA256(key, "flowport/column-hash-salt/v1")``, hex),
  so one owner's flows hash a value alike (their outputs join) and nobody without the key can
  hash a guess to compare.
* ``columns.encrypt``: each value (as text; NULL stays NULL) is AES-256-GCM encrypted under a data
  key derived from the flow owner's customer key (``encrypt.wrapped.key``), base64 text out.

The rules run first, on the extract, before converters, checks and the fork, as Spark expressions
(hash) and an Arrow UDF (encrypt) in the pass the writers make: no extra read.

Where the key comes from: the JobSpec carries the customer key only wrapped by the portal's
master key (``encrypt.wrapped.key``); the worker unwraps it in its memory
(:func:`portal.crypto.encrypted.column_key`) into ``JobSpec.column_key``, never serialized.  Each
task derives its own data key, ``HKDF-SHA256(customer key, salt=16 random bytes, info="flowport/
column-key/v1")``, so the Spark executors get the data key, never the customer key.

An encrypted value, base64 of::

    0x01 | key check (4 bytes, as portal.crypto.client) | key salt (16 bytes) | nonce (12 bytes)
    | ciphertext + tag (16 bytes)

with GCM associated data ``"flowport/column/v1:" + column name + the 21 header bytes``: a value
moved to another column does not decrypt.  Decrypt with the customer key's file::

    python -m portal.pipeline.columns decrypt --key-file my.key --column email < values.txt

(one value per line in, one plaintext per line out), or :func:`decrypt_value` from Python.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import hmac
import os
import sys
from collections.abc import Callable
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from portal.crypto import client
from portal.pipeline.columnrules import DROP, ENCRYPT, HASH, SALT, overlaps, wanted
from portal.pipeline.converters import Converter, ConverterContext
from portal.pipeline.errors import ConfigError
from portal.pipeline.properties import Properties

VERSION = 1
KEY_SALT_BYTES = 16
_HEADER = 1 + client.CHECK_BYTES + KEY_SALT_BYTES
_KEY_INFO = b"flowport/column-key/v1"
_SALT_INFO = b"flowport/column-hash-salt/v1"
_AAD = b"flowport/column/v1:"


class ColumnDecryptError(ValueError):
    """A value that does not decrypt with the given key and column (the message says why)."""


class ColumnRules(Converter):
    """The rules of the pre-fork stream; built (and checked) before anything is read."""

    def __init__(self, props: Properties, context: ConverterContext, key: bytes | None) -> None:
        super().__init__(props, context)
        self.rules = wanted(props)
        problems = overlaps(self.rules)
        if problems:
            raise ConfigError("; ".join(problems))
        self.salt = props.get(SALT) or ""
        needs = ENCRYPT in self.rules or (HASH in self.rules and not self.salt)
        if needs and key is None:
            raise ConfigError(
                f"{', '.join(k for k in (HASH, ENCRYPT) if k in self.rules)}: the flow owner's customer key "
                "(encrypt.wrapped.key, unwrapped by the worker) is not available to this run"
            )
        if HASH in self.rules and not self.salt:
            assert key is not None
            self.salt = hmac.new(key, _SALT_INFO, hashlib.sha256).hexdigest()
        self._key = key

    def convert(self, df: DataFrame) -> DataFrame:
        for key, names in self.rules.items():
            self._check_fields(df, names, key)
        df = df.drop(*self.rules.get(DROP, []))
        changed: dict[str, Column] = {}
        for name in self.rules.get(HASH, []):
            changed[name] = F.sha2(F.concat(F.lit(self.salt), F.col(f"`{name}`").cast("string")), 256)
        if ENCRYPT in self.rules:
            assert self._key is not None
            data_key, header = task_key(self._key)
            for name in self.rules[ENCRYPT]:
                encrypt = F.pandas_udf(_encrypter(data_key, header, name), "string")  # type: ignore[call-overload]
                changed[name] = encrypt(F.col(f"`{name}`").cast("string"))
        return df.withColumns(changed) if changed else df


def converters(props: Properties, context: ConverterContext, key: bytes | None) -> list[Converter]:
    """The column rules as the pre-fork stream's first converter (none when no rule is set)."""
    return [ColumnRules(props, context, key)] if wanted(props) else []


def task_key(customer_key: bytes) -> tuple[bytes, bytes]:
    """A fresh data key and the header that names it (version, key check, key salt)."""
    key_salt = os.urandom(KEY_SALT_BYTES)
    header = bytes([VERSION]) + client.key_check(customer_key) + key_salt
    return _derive(customer_key, key_salt), header


def _derive(customer_key: bytes, key_salt: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=key_salt, info=_KEY_INFO).derive(customer_key)


def _aad(column: str, header: bytes) -> bytes:
    return _AAD + column.encode("utf-8") + header


def _encrypter(data_key: bytes, header: bytes, column: str) -> Callable[[Any], Any]:
    aad, nonce_bytes = _aad(column, header), client.NONCE_BYTES

    def encrypt(values: Any) -> Any:  # a pandas Series of str / None, in a Python worker
        # Imported in the worker: cloudpickle cannot ship the (Rust-backed) AESGCM class by value.
        import base64
        import os

        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        aead = AESGCM(data_key)

        def one(value: Any) -> str | None:
            if value is None or value != value:  # None or NaN
                return None
            nonce = os.urandom(nonce_bytes)
            sealed = aead.encrypt(nonce, str(value).encode("utf-8"), aad)
            return base64.b64encode(header + nonce + sealed).decode("ascii")

        return values.map(one)

    import pandas as pd  # Spark reads the UDF's kind from these hints; only encrypting jobs pay the import

    encrypt.__annotations__ = {"values": pd.Series, "return": pd.Series}
    return encrypt


def decrypt_value(customer_key: bytes, column: str, value: str) -> str:
    """The plaintext of one encrypted value of ``column``; ColumnDecryptError saying why not."""
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ColumnDecryptError("the value is not base64") from None
    if len(raw) < _HEADER + client.NONCE_BYTES + client.TAG_BYTES or raw[0] != VERSION:
        raise ColumnDecryptError("the value is not an encrypted column value (version 1)")
    header = raw[:_HEADER]
    if not hmac.compare_digest(header[1 : 1 + client.CHECK_BYTES], client.key_check(customer_key)):
        raise ColumnDecryptError("the value was encrypted under another customer key")
    data_key = _derive(customer_key, header[1 + client.CHECK_BYTES :])
    nonce = raw[_HEADER : _HEADER + client.NONCE_BYTES]
    try:
        plain = AESGCM(data_key).decrypt(nonce, raw[_HEADER + client.NONCE_BYTES :], _aad(column, header))
    except InvalidTag:
        raise ColumnDecryptError(
            f"the value does not decrypt as column '{column}' (another column's, or changed)"
        ) from None
    return plain.decode("utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portal.pipeline.columns")
    sub = parser.add_subparsers(dest="command", required=True)
    decrypt = sub.add_parser("decrypt", help="decrypt a column's values (one per line on stdin)")
    decrypt.add_argument(
        "--key-file", required=True, help="the customer key (base64), as generate-key wrote it"
    )
    decrypt.add_argument("--column", required=True, help="the column the values were encrypted in")
    args = parser.parse_args(argv)
    with open(args.key_file, encoding="ascii") as fh:
        key = client.load_key(fh.read())
    failed = 0
    for number, line in enumerate(sys.stdin, start=1):
        value = line.strip()
        if not value:
            print()
            continue
        try:
            print(decrypt_value(key, args.column, value))
        except ColumnDecryptError as error:
            failed += 1
            print(f"line {number}: {error}", file=sys.stderr)
            print()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
