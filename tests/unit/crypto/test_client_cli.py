"""The customer-side helper, as a customer runs it: a separate process, no
Django, their own key file; the portal decrypts what it produced."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from portal.crypto import client
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, decrypt_properties
from portal.keys import services
from tests.builders.keys import SECRET

ROOT = Path(__file__).resolve().parents[3]


def run(*args: str, stdin: str = "", cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run(
        [sys.executable, *args], input=stdin, capture_output=True, text=True, cwd=cwd, env=env, timeout=60
    )


@pytest.mark.django_db
def test_cli_round_trip_and_the_portal_decrypts_it(tmp_path, owner, master_key_file):
    key_file = tmp_path / "my.key"
    made = run("-m", "portal.crypto.client", "generate-key", "--out", str(key_file))
    assert made.returncode == 0, made.stderr
    assert made.stdout == ""  # the key went to the file only
    assert key_file.stat().st_mode & 0o777 == 0o600
    key = client.load_key(key_file.read_text())

    encrypted = run("-m", "portal.crypto.client", "encrypt", "--key-file", str(key_file), stdin=SECRET + "\n")
    assert encrypted.returncode == 0, encrypted.stderr
    value = encrypted.stdout.strip()
    assert client.is_encrypted(value) and SECRET not in encrypted.stdout + encrypted.stderr

    decrypted = run("-m", "portal.crypto.client", "decrypt", "--key-file", str(key_file), stdin=value)
    assert decrypted.returncode == 0 and decrypted.stdout == SECRET

    fingerprint = run("-m", "portal.crypto.client", "fingerprint", "--key-file", str(key_file))
    wrapped = services.wrap_customer_key(user=owner, key=key_file.read_text()).customer_key
    assert fingerprint.stdout.strip() == wrapped.short_fingerprint
    properties = {"source.conn.password": value, WRAPPED_KEY_PROPERTY: wrapped.wrapped_key}
    assert decrypt_properties(properties)["source.conn.password"] == SECRET
    assert client.decrypt(key, value) == SECRET

    # Bound to the key's owner as the portal lists it: the portal accepts it in the owner's flows.
    bound = run(
        "-m", "portal.crypto.client", "encrypt", "--key-file", str(key_file), "--owner", wrapped.binding,
        stdin=SECRET,
    )  # fmt: skip
    assert bound.returncode == 0, bound.stderr
    assert client.owner_of(bound.stdout.strip()) == f"user:{owner.pk}"
    properties["source.conn.password"] = bound.stdout.strip()
    assert decrypt_properties(properties)["source.conn.password"] == SECRET
    assert services.owner_problems(owner, properties) == []


def test_the_helper_is_one_file_that_needs_no_django(tmp_path):
    shutil.copy(ROOT / "portal" / "crypto" / "client.py", tmp_path / "flowport_client.py")
    probe = run(
        "-c",
        "import sys, flowport_client as c; k = c.generate_key(); "
        "assert c.decrypt(k, c.encrypt(k, 'x')) == 'x'; print('django' in sys.modules)",
        cwd=tmp_path,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "False"


def test_cli_errors_are_short_and_leak_nothing(tmp_path):
    key_file = tmp_path / "bad.key"
    key_file.write_text("not a key")
    result = run("-m", "portal.crypto.client", "encrypt", "--key-file", str(key_file), stdin=SECRET)
    assert result.returncode != 0 and "must be 32 bytes" in result.stderr
    assert SECRET not in result.stdout + result.stderr

    good = tmp_path / "good.key"
    good.write_text(client.encode_key(client.generate_key()))
    other = client.encrypt(client.generate_key(), SECRET)
    result = run("-m", "portal.crypto.client", "decrypt", "--key-file", str(good), stdin=other)
    assert result.returncode == 1 and "different key" in result.stderr and SECRET not in result.stderr

    exists = run("-m", "portal.crypto.client", "generate-key", "--out", str(good))
    assert exists.returncode != 0 and "cannot create" in exists.stderr
