"""An ENC(...) value is decrypted only where a secret belongs (`holds_secret`): a password, a
token, a key, the user half of a credential, or an attribute declared encrypted outside the
pipeline's own keys. In the pipeline's keys (a dataset, a table, a folder) it would be shown in
clear to every user, so the worker leaves it sealed."""

from __future__ import annotations

import pytest

from portal.crypto.encrypted import (
    ENCRYPTED_ATTRIBUTES_KEY,
    WRAPPED_KEY_PROPERTY,
    decrypt_properties,
    holds_secret,
    sealed_keys,
    secret_values,
)
from portal.keys import services
from tests.builders.keys import SECRET


@pytest.mark.parametrize(
    ("key", "declared", "secret"),
    [
        ("source.conn.password", (), True),
        ("writer.jdbc.password.1", (), True),
        ("writer.iceberg.catalog.password", (), True),
        ("flowport.hop.source.password", (), True),
        ("my.api.key", (), True),
        ("db.pwd", (), True),
        ("source.conn.username", (), True),
        ("writer.jdbc.username.0", (), True),
        ("flowport.hop.source.sasl.username", (), True),
        ("db.login", (), True),
        ("db.credentials", ("db.credentials",), True),
        ("my.attribute", ("my.attribute",), True),
        ("my.attribute", (), False),
        ("dataset.urn", (), False),
        ("dataset.urn", ("dataset.urn",), False),
        ("source.files.datasets", ("source.files.datasets",), False),
        ("source.jdbc.tables", (), False),
        ("writer.jdbc.table", ("writer.jdbc.table",), False),
        ("writer.iceberg.table", (), False),
        ("source.files.format", (), False),
        ("gobblin.dataset.pattern", ("gobblin.dataset.pattern",), False),
        ("flowport.hop.source.path", (), False),
    ],
)
def test_which_keys_hold_a_secret(key, declared, secret):
    assert holds_secret(key, declared) is secret


def test_the_worker_decrypts_the_password_and_user_and_leaves_a_dataset_name_sealed(stored_key):
    sealed = services.encrypt_value(stored_key.wrapped_key, SECRET)
    properties = {
        "source.conn.password": sealed,
        "source.conn.username": services.encrypt_value(stored_key.wrapped_key, "etl"),
        "source.files.datasets": sealed,
        "db.attribute": services.encrypt_value(stored_key.wrapped_key, "declared"),
        # Declaring a name encrypted changes nothing: the pipeline reads it as a name.
        ENCRYPTED_ATTRIBUTES_KEY: "db.attribute, source.files.datasets",
        WRAPPED_KEY_PROPERTY: stored_key.wrapped_key,
    }
    plain = decrypt_properties(properties)
    assert plain["source.conn.password"] == SECRET
    assert plain["source.conn.username"] == "etl"
    assert plain["db.attribute"] == "declared"
    assert plain["source.files.datasets"] == sealed
    assert sealed_keys(properties) == ["source.files.datasets"]
    # What the log hides: the plaintexts, not the sealed value (it is shown as ENC(…) anyway).
    assert secret_values(properties, plain) == {SECRET, "etl", "declared"}


def test_a_sealed_value_needs_no_key_to_stay_sealed(master_key_file):
    """Nothing is unwrapped for a value that is not decrypted: no wrapped key, no error."""
    properties = {"dataset.urn": "ENC(AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA)"}
    assert decrypt_properties(properties) == properties
