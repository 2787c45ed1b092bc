"""Where the master key comes from, and the portal refusing a key file that
others can read — at start-up (system check) and on use."""

from __future__ import annotations

import io
import json
import os

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from portal.crypto import client, wrapping
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, decrypt_properties
from portal.crypto.errors import DecryptionError, MasterKeyError
from portal.crypto.master import BARE_KEY_ID, get_ring, new_ring, read_ring_file, write_ring_file
from portal.keys.checks import check_master_key


def check_ids() -> list[str]:
    return [message.id for message in check_master_key()]


def test_a_key_file_readable_by_others_is_refused_at_start_up_and_on_use(master_key_file):
    ring = get_ring()
    assert check_ids() == []
    os.chmod(master_key_file, 0o644)
    assert check_ids() == ["keys.E001"]
    with pytest.raises(MasterKeyError, match="permissions 0644, wider than 0600"):
        get_ring()
    # The worker's entry point says so too, naming the property it could not use.
    key = client.generate_key()
    properties = {"p.password": client.encrypt(key, "x"), WRAPPED_KEY_PROPERTY: wrapping.wrap(ring, key)}
    with pytest.raises(DecryptionError, match="wider than 0600") as caught:
        decrypt_properties(properties)
    assert caught.value.code == "master_key_unavailable"
    assert str(caught.value).startswith(repr(WRAPPED_KEY_PROPERTY))


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_owner_only_modes_are_accepted(master_key_file, mode):
    os.chmod(master_key_file, mode)
    assert check_ids() == []
    assert get_ring().active_id


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o700, 0o666])
def test_any_wider_mode_is_refused(master_key_file, mode):
    os.chmod(master_key_file, mode)
    assert check_ids() == ["keys.E001"]


def test_a_configured_file_that_does_not_exist_is_an_error_not_created(settings, tmp_path):
    settings.FLOWPORT_MASTER_KEY_FILE = str(tmp_path / "nope")
    settings.FLOWPORT_MASTER_KEY = ""
    assert check_ids() == ["keys.E004"]
    with pytest.raises(MasterKeyError, match="does not exist"):
        get_ring()
    assert not (tmp_path / "nope").exists()


def test_embedded_mode_creates_var_master_key_on_first_use(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.FLOWPORT_MASTER_KEY_FILE = ""
    settings.FLOWPORT_MASTER_KEY = ""
    assert check_ids() == []  # nothing yet, and nothing wrong
    ring = get_ring()
    path = tmp_path / "master-key"
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert get_ring() == ring == read_ring_file(path)


def test_malformed_key_files_are_errors_that_show_no_key_material(master_key_file):
    secretish = client.encode_key(b"k" * 16)
    for text, words in (
        ("", "is empty"),
        ("{nope", "neither a base64 key nor a JSON key ring"),
        (json.dumps({"active": "a", "keys": {"a": secretish}}), "32 bytes"),
        (json.dumps({"active": "b", "keys": {"a": client.encode_key(b"k" * 32)}}), "'active' must name"),
        (json.dumps({"active": "a b", "keys": {"a b": client.encode_key(b"k" * 32)}}), "key id"),
    ):
        master_key_file.write_text(text)
        [message] = check_master_key()
        assert message.id == "keys.E002" and words in message.msg
        assert secretish not in message.msg
        with pytest.raises(MasterKeyError, match=words):
            get_ring()


def test_a_bare_base64_key_is_a_ring_of_one(master_key_file):
    key = client.generate_key()
    master_key_file.write_text(client.encode_key(key) + "\n")
    ring = get_ring()
    assert ring.active_id == BARE_KEY_ID and ring.active_key == key


def test_the_environment_variable_is_for_development(settings):
    key = client.generate_key()
    settings.FLOWPORT_MASTER_KEY_FILE = ""
    settings.FLOWPORT_MASTER_KEY = client.encode_key(key)
    settings.DEBUG = False
    assert get_ring().active_key == key
    assert check_ids() == ["keys.W001"]
    settings.DEBUG = True
    assert check_ids() == []
    settings.FLOWPORT_MASTER_KEY = new_ring().to_text()  # a whole ring works too
    assert get_ring().active_id.startswith("mk-")
    settings.FLOWPORT_MASTER_KEY_FILE = "/etc/flowport/master-key"
    assert check_ids() == ["keys.E003"]
    with pytest.raises(MasterKeyError, match="not both"):
        get_ring()


def test_running_processes_see_a_rewritten_key_file(master_key_file):
    before = get_ring()
    write_ring_file(master_key_file, before.with_new_active_key())
    after = get_ring()
    assert after.active_id != before.active_id
    assert set(after.keys) == {before.active_id, after.active_id}
    assert os.stat(master_key_file).st_mode & 0o777 == 0o600


def test_rings_never_show_their_keys(master_key_file):
    ring = get_ring()
    assert client.encode_key(ring.active_key) not in repr(ring) + str(ring)


def test_ensure_master_key_creates_then_reuses_the_file(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.FLOWPORT_MASTER_KEY_FILE = ""
    settings.FLOWPORT_MASTER_KEY = ""
    out = io.StringIO()
    call_command("ensure_master_key", stdout=out)
    path = tmp_path / "master-key"
    ring = read_ring_file(path)
    assert out.getvalue().startswith(f"Created master key file {path}: active key {ring.active_id}")
    assert client.encode_key(ring.active_key) not in out.getvalue()
    assert os.stat(path).st_mode & 0o777 == 0o600
    out = io.StringIO()
    call_command("ensure_master_key", stdout=out)
    assert out.getvalue().startswith("Using master key file")
    assert read_ring_file(path) == ring
    os.chmod(path, 0o644)
    with pytest.raises(CommandError, match="wider than 0600"):
        call_command("ensure_master_key", stdout=io.StringIO())


def test_a_var_dir_where_no_file_can_be_made_is_a_master_key_error_not_a_crash(settings, tmp_path):
    (tmp_path / "a-file").write_text("")
    settings.VAR_DIR = tmp_path / "a-file" / "var"  # cannot be a directory, even for root
    settings.FLOWPORT_MASTER_KEY_FILE = ""
    settings.FLOWPORT_MASTER_KEY = ""
    with pytest.raises(MasterKeyError, match="cannot be read: Not a directory"):
        get_ring()


def test_a_key_path_that_is_not_a_file_is_refused(settings, tmp_path):
    (tmp_path / "master-key").mkdir()
    settings.FLOWPORT_MASTER_KEY_FILE = str(tmp_path / "master-key")
    settings.FLOWPORT_MASTER_KEY = ""
    with pytest.raises(MasterKeyError, match="not a regular file"):
        get_ring()
    assert check_ids() == ["keys.E001"]
