"""ENC(...) values and wrapped keys: round trips, and each way they can be
wrong giving its own error that names the property and leaks nothing."""

from __future__ import annotations

import base64

import pytest

from portal.crypto import client, wrapping
from portal.crypto.encrypted import (
    REDACTED,
    WRAPPED_KEY_PROPERTY,
    decrypt_properties,
    format_problems,
    is_encrypted,
    redact,
)
from portal.crypto.errors import DecryptionError, WrappedKeyError
from portal.crypto.master import MasterKeyRing, new_ring
from tests.builders.keys import SECRET, flip_byte


def tamper_enc(value: str, index: int = -1) -> str:
    return f"ENC({flip_byte(value[4:-1], index)})"


@pytest.fixture
def master() -> MasterKeyRing:
    return new_ring()


@pytest.fixture
def job(master):
    """Properties as the worker gets them: a wrapped key and two secrets."""
    key = client.generate_key()
    return key, {
        "source.conn.username": "etl",
        "source.conn.password": client.encrypt(key, SECRET),
        "writer.jdbc.password": client.encrypt(key, ""),
        WRAPPED_KEY_PROPERTY: wrapping.wrap(master, key),
    }


def assert_leaks_nothing(error: Exception, *secrets: str | bytes) -> None:
    text = str(error) + repr(error.args)
    for secret in secrets:
        if isinstance(secret, bytes):
            for form in (client.encode_key(secret), secret.hex()):
                assert form not in text
        elif secret:
            assert secret not in text


def test_enc_round_trip_is_randomised_and_text_safe():
    key = client.generate_key()
    first, second = client.encrypt(key, SECRET), client.encrypt(key, SECRET)
    assert first.startswith("ENC(") and first.endswith(")")
    assert first != second  # a fresh nonce each time
    assert SECRET not in first
    assert client.decrypt(key, first) == client.decrypt(key, second) == SECRET
    assert is_encrypted(first)
    assert not is_encrypted(SECRET) and not is_encrypted("ENC(abc)") and not is_encrypted(None)


def test_decrypt_properties_decrypts_every_enc_value_and_keeps_the_rest(master, job):
    _key, properties = job
    plain = decrypt_properties(properties, ring=master)
    assert plain["source.conn.password"] == SECRET
    assert plain["writer.jdbc.password"] == ""
    assert plain["source.conn.username"] == "etl"
    assert plain[WRAPPED_KEY_PROPERTY] == properties[WRAPPED_KEY_PROPERTY]
    assert properties["source.conn.password"] != SECRET  # the input is not changed
    assert decrypt_properties({"a": "b"}, ring=master) == {"a": "b"}  # nothing to do, no key needed


@pytest.mark.parametrize(
    ("change", "code", "property_key", "words"),
    [
        (
            lambda p, k, m: {**p, "source.conn.password": tamper_enc(p["source.conn.password"])},
            "tampered_value",
            "source.conn.password",
            "integrity check",
        ),
        (
            lambda p, k, m: {**p, "source.conn.password": client.encrypt(client.generate_key(), SECRET)},
            "wrong_customer_key",
            "source.conn.password",
            "different customer key",
        ),
        (
            lambda p, k, m: {**p, "source.conn.password": "ENC(not base64!)"},
            "malformed_value",
            "source.conn.password",
            "not a valid ENC",
        ),
        (
            lambda p, k, m: {key: v for key, v in p.items() if key != WRAPPED_KEY_PROPERTY},
            "missing_wrapped_key",
            "source.conn.password",
            "no 'encrypt.wrapped.key'",
        ),
        (
            lambda p, k, m: {**p, WRAPPED_KEY_PROPERTY: flip_byte(p[WRAPPED_KEY_PROPERTY], -1)},
            "tampered_wrapped_key",
            WRAPPED_KEY_PROPERTY,
            "integrity check",
        ),
        (
            lambda p, k, m: {**p, WRAPPED_KEY_PROPERTY: "not a wrapped key"},
            "malformed_wrapped_key",
            WRAPPED_KEY_PROPERTY,
            "not a wrapped key",
        ),
        (
            lambda p, k, m: {**p, WRAPPED_KEY_PROPERTY: wrapping.wrap(new_ring(), k)},
            "unknown_master_key",
            WRAPPED_KEY_PROPERTY,
            "which this portal does not have",
        ),
        (
            # Same master key id, different key: the key file was replaced.
            lambda p, k, m: {
                **p,
                WRAPPED_KEY_PROPERTY: wrapping.wrap(
                    MasterKeyRing(m.active_id, {m.active_id: client.generate_key()}), k
                ),
            },
            "wrong_master_key",
            WRAPPED_KEY_PROPERTY,
            "different key than this portal's master key",
        ),
    ],
)
def test_each_failure_has_its_own_code_and_message_naming_the_property(
    master, job, change, code, property_key, words
):
    key, properties = job
    with pytest.raises(DecryptionError) as caught:
        decrypt_properties(change(properties, key, master), ring=master)
    error = caught.value
    assert error.code == code
    assert error.property_key == property_key
    assert str(error).startswith(repr(property_key))
    assert words in str(error)
    assert not isinstance(error, KeyError)
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)
    assert_leaks_nothing(error, SECRET, key, master.active_key)


def test_wrapped_key_unwraps_only_with_its_master_key(master):
    key = client.generate_key()
    wrapped = wrapping.wrap(master, key)
    assert wrapping.unwrap(master, wrapped) == key
    assert wrapping.parse(wrapped).master_key_id == master.active_id
    assert client.encode_key(key) not in wrapped
    with pytest.raises(WrappedKeyError) as caught:
        wrapping.unwrap(new_ring(), wrapped)
    assert caught.value.code == "unknown_master_key"


def test_a_rotated_ring_unwraps_old_and_new_envelopes(master):
    key = client.generate_key()
    old = wrapping.wrap(master, key)
    rotated = master.with_new_active_key()
    new = wrapping.rewrap(rotated, old)
    assert wrapping.parse(new).master_key_id == rotated.active_id != master.active_id
    assert wrapping.unwrap(rotated, old) == wrapping.unwrap(rotated, new) == key
    with pytest.raises(WrappedKeyError):
        wrapping.unwrap(rotated.without({master.active_id}), old)


def test_format_problems_name_each_property():
    key = client.generate_key()
    value = client.encrypt(key, SECRET)
    wrapped = wrapping.wrap(new_ring(), key)
    assert format_problems({"a": value, WRAPPED_KEY_PROPERTY: wrapped, "b": "clear"}) == []
    assert format_problems({"a": "plain"}) == []
    [missing] = format_problems({"db.password": value})
    assert "'db.password'" in missing and WRAPPED_KEY_PROPERTY in missing
    [malformed] = format_problems({"db.password": "ENC(AAAA", WRAPPED_KEY_PROPERTY: wrapped})
    assert "'db.password' is not a valid ENC(...) value" in malformed
    [bad_wrapped] = format_problems({"db.password": value, WRAPPED_KEY_PROPERTY: "AAAA"})
    assert bad_wrapped.startswith(f"{WRAPPED_KEY_PROPERTY!r} is not a wrapped key")


def test_redact_masks_enc_values_declared_and_secret_looking_keys():
    properties = {
        "source.conn.password": client.encrypt(client.generate_key(), SECRET),
        "source.conn.user": "etl",
        "db.pass": "clear-secret",
        "s3.access.key": "clear-access-key",
        "fork.one.pass": "false",
        "my.attribute": "declared-secret",
        "gobblin.template.encrypted_attributes": "my.attribute",
        "extra": "given-secret",
        "empty.token": "",
    }
    redacted = redact(properties, secret_keys=["extra"])
    assert redacted == {
        "source.conn.password": "ENC(…)",
        "source.conn.user": "etl",
        "db.pass": REDACTED,
        "s3.access.key": REDACTED,
        "fork.one.pass": "false",
        "my.attribute": REDACTED,
        "gobblin.template.encrypted_attributes": "my.attribute",
        "extra": REDACTED,
        "empty.token": "",
    }


def test_keys_must_be_aes_256_in_base64():
    key = client.generate_key()
    assert client.load_key(client.encode_key(key)) == key
    assert client.load_key(base64.urlsafe_b64encode(key).decode().rstrip("=")) == key
    for bad, words in (("", "empty"), ("@@@@", "base64"), (client.encode_key(b"x" * 16), "32 bytes")):
        with pytest.raises(client.EncryptedValueError, match=words):
            client.load_key(bad)


def test_too_long_plaintext_is_refused_before_encrypting():
    with pytest.raises(client.EncryptedValueError) as caught:
        client.encrypt(client.generate_key(), "x" * (client.MAX_PLAINTEXT_BYTES + 1))
    assert caught.value.code == "too_long"
    # The longest value still fits a flow property.
    from portal.flows.validators import MAX_PROPERTY_VALUE

    assert len(client.encrypt(client.generate_key(), "x" * client.MAX_PLAINTEXT_BYTES)) <= MAX_PROPERTY_VALUE


def test_a_data_node_secret_decrypts_with_the_node_s_own_wrapped_key(master, job):
    """A topology node's secrets reach the job under `flowport.hop.source.`
    with the node's own wrapped key beside them; the flow's key is not used."""
    flow_key, properties = job
    node_key = client.generate_key()
    properties = {
        **properties,
        "flowport.hop.source.password": client.encrypt(node_key, "node-secret"),
        f"flowport.hop.source.{WRAPPED_KEY_PROPERTY}": wrapping.wrap(master, node_key),
    }
    plain = decrypt_properties(properties, ring=master)
    assert plain["flowport.hop.source.password"] == "node-secret"
    assert plain["source.conn.password"] == SECRET

    del properties[f"flowport.hop.source.{WRAPPED_KEY_PROPERTY}"]  # falls back to the flow's key: wrong key
    with pytest.raises(DecryptionError) as failure:
        decrypt_properties(properties, ring=master)
    assert failure.value.property_key == "flowport.hop.source.password"
    assert_leaks_nothing(failure.value, "node-secret", node_key, flow_key)


def test_a_value_is_bound_to_its_owner_as_authenticated_data():
    key = client.generate_key()
    value = client.encrypt(key, "s3cret", "group:7")
    assert client.owner_of(value) == "group:7" and client.decrypt(key, value) == "s3cret"
    raw = bytearray(base64.b64decode(value[4:-1]))
    raw[-30] ^= 1  # the ciphertext
    with pytest.raises(client.EncryptedValueError) as tampered:
        client.decrypt(key, f"ENC({base64.b64encode(bytes(raw)).decode()})")
    assert tampered.value.code == "tampered"
    owner_edit = bytearray(base64.b64decode(value[4:-1]))
    owner_edit[12] = ord("8")  # group:7 -> group:8
    forged = f"ENC({base64.b64encode(bytes(owner_edit)).decode()})"
    assert client.owner_of(forged) == "group:8"
    with pytest.raises(client.EncryptedValueError) as rebound:
        client.decrypt(key, forged)
    assert rebound.value.code == "tampered"


def test_a_version_1_value_has_no_owner_and_still_decrypts():
    key = client.generate_key()
    legacy = client.encrypt(key, "old")
    assert base64.b64decode(legacy[4:-1])[0] == 1
    assert client.owner_of(legacy) is None and client.decrypt(key, legacy) == "old"


@pytest.mark.parametrize("owner", ["alice", "user:", "user:0", "team:3", "user:1 ", "group:-2"])
def test_an_owner_that_is_not_user_or_group_id_is_refused(owner):
    with pytest.raises(client.EncryptedValueError) as refused:
        client.encrypt(client.generate_key(), "x", owner)
    assert refused.value.code == "malformed_owner"
