"""A master key file of the test's own (mode 0600, in tmp_path) and customer keys wrapped
with it through the real service: the fixtures crypto's tests and the keys app's share.

A conftest.py imports the fixtures it needs by name, which makes them its own."""

from __future__ import annotations

import base64

import pytest

from portal.crypto import client
from portal.crypto.master import create_ring_file, get_ring
from portal.keys import services

SECRET = "tr0ub4dor&3 \N{SNOWMAN} s3cret"


def flip_byte(b64: str, index: int) -> str:
    raw = bytearray(base64.b64decode(b64))
    raw[index] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


@pytest.fixture
def master_key_file(settings, tmp_path):
    path = tmp_path / "master-key"
    create_ring_file(path)
    settings.FLOWPORT_MASTER_KEY_FILE = str(path)
    settings.FLOWPORT_MASTER_KEY = ""
    return path


@pytest.fixture
def ring(master_key_file):
    return get_ring()


@pytest.fixture
def customer_key() -> bytes:
    return client.generate_key()


@pytest.fixture
def stored_key(owner, master_key_file, customer_key):
    """The owner's customer key, wrapped and stored by the portal."""
    return services.wrap_customer_key(
        user=owner, key=client.encode_key(customer_key), label="main"
    ).customer_key
