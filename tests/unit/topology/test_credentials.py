"""topology.credentials: the secrets a staff member might write inside a node's
connection value, found (to refuse them at save) and masked (to show a node
saved before that rule); and the options that only look like secrets."""

from __future__ import annotations

import pytest

from portal.topology import credentials
from portal.topology.nodefields import masked_properties


@pytest.mark.parametrize(
    ("value", "found", "shown"),
    [
        (
            "jdbc:postgresql://db:5432/sales?user=svc&password=hunter2",
            ["password="],
            "jdbc:postgresql://db:5432/sales?user=svc&password=********",
        ),
        (
            "jdbc:mysql://svc:hunter2@db:3306/shop",
            ["user:password@"],
            "jdbc:mysql://svc:********@db:3306/shop",
        ),
        # a password holding '@': the user part ends at the last '@', as urllib splits it
        ("jdbc:mysql://svc:p@ss@db/shop?x=1", ["user:password@"], "jdbc:mysql://svc:********@db/shop?x=1"),
        (
            "jdbc:sqlserver://db:1433;user=sa;password=p@ss;encrypt=true",
            ["password="],
            "jdbc:sqlserver://db:1433;user=sa;password=********;encrypt=true",
        ),
        (
            'PlainLoginModule required username="svc" password="hunter2";',
            ["password="],
            'PlainLoginModule required username="svc" password="********";',
        ),
        (
            "jdbc:mysql://h/db?trustCertificateKeyStorePassword=zz&password2=yy",
            ["trustCertificateKeyStorePassword=", "password2="],
            "jdbc:mysql://h/db?trustCertificateKeyStorePassword=********&password2=********",
        ),
        (
            "https://api.example.org/?access_token=t0k",
            ["access_token="],
            "https://api.example.org/?access_token=********",
        ),
    ],
)
def test_a_secret_inside_a_value_is_found_and_masked(value, found, shown):
    assert credentials.secrets_in(value) == found
    assert credentials.masked(value) == shown


@pytest.mark.parametrize(
    "value",
    [
        "jdbc:postgresql://db:5432/sales?user=svc",
        "jdbc:mysql://svc@db:3306/shop",
        "jdbc:postgresql://db/x?password=",  # empty: nothing to hide
        "jdbc:postgresql://db/x?password=ENC(djE6YWJj)",  # already ciphertext
        "jdbc:postgresql://db/x?sslpasswordcallback=org.example.Cb&sslkey=/etc/k.pem",
        "jdbc:mysql://h/db?passwordCharacterEncoding=utf8&disconnectOnExpiredPasswords=true&bypass=1",
        "jdbc:postgresql://[::1]:5432/db",
        "var/data/lake",
        "kafka1:9092,kafka2:9092",
    ],
)
def test_what_only_looks_like_a_secret_is_left_alone(value):
    assert credentials.secrets_in(value) == []
    assert credentials.masked(value) == value


def test_a_node_shown_to_others_hides_secret_named_values_and_wrapped_keys():
    shown = masked_properties(
        {
            "url": "jdbc:postgresql://db/x?password=hunter2",
            "sasl.password": "ENC(djE6YWJj)",
            "token": "oops-in-clear",
            "encrypt.wrapped.key": "d3JhcHBlZA==",
            "driver": "org.postgresql.Driver",
        }
    )
    assert shown == {
        "url": "jdbc:postgresql://db/x?password=********",
        "sasl.password": "ENC(…)",
        "token": "********",
        "encrypt.wrapped.key": "********",
        "driver": "org.postgresql.Driver",
    }
