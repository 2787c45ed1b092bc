"""Crypto's tests run with a master key file of their own (tests/builders/keys.py)."""

from tests.builders.keys import customer_key, master_key_file, ring, stored_key

__all__ = ["customer_key", "master_key_file", "ring", "stored_key"]
