"""One rule says which keys name a secret (`crypto.secretnames.names_secret`), and every surface
follows it: the save's refusal of a clear value, the worker's decryption, the pages' and the
versions' masking, the pipeline's error text and the job's log. `s3.access.key` is a secret
everywhere and `fork.one.pass` (a pass over the data) nowhere; before, the flow page masked
`fork.one.pass` while a failed job's message showed the access key in clear."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from portal.crypto.client import looks_encrypted
from portal.crypto.encrypted import REDACTED, holds_secret, redact, secret_values
from portal.crypto.secretnames import names_secret, secret_keys
from portal.keys import services
from portal.pipeline.properties import Properties
from portal.pipeline.propertyrules import clear_secret_keys
from portal.pipeline.task import describe_exception, describe_traceback
from portal.topology.credentials import secrets_in
from portal.topology.validators import validate_connection_properties
from tests.builders.world import World

VALUE = "AKIA-clear-value-42"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("s3.access.key", True),
        ("fs.s3a.secret.key", True),
        ("writer.jdbc.password", True),
        ("writer.jdbc.password.1", True),
        ("db.pwd", True),
        ("db.pass", True),
        ("pass", True),
        ("my.api.key", True),
        ("oauth.token", True),
        ("columns.hash.secret", True),
        ("db.credentials", True),
        ("spark.ssl.trustStorePassword", True),
        ("sslpassword", True),
        ("password1", True),
        ("access_token", True),
        ("fork.one.pass", False),
        ("extract.primary.key.fields", False),
        ("passwordCharacterEncoding", False),
        ("password.encoding", False),
        ("token.endpoint", False),
        ("encrypt.wrapped.key", False),
        ("source.conn.username", False),
        ("bypass", False),
    ],
)
def test_which_names_name_a_secret(name, secret):
    assert names_secret(name) is secret


@pytest.mark.parametrize(("key", "secret"), [("s3.access.key", True), ("fork.one.pass", False)])
def test_every_surface_follows_the_one_rule(key, secret):
    clear = {key: VALUE}
    # The save: a secret given in clear is refused.
    assert clear_secret_keys(clear, looks_encrypted) == ([key] if secret else [])
    # Data node connection properties: the same.
    if secret:
        with pytest.raises(ValidationError, match=key):
            validate_connection_properties(clear)
    else:
        validate_connection_properties(clear)
    assert secrets_in(f"jdbc:postgresql://db/x?{key}={VALUE}") == ([f"{key}="] if secret else [])
    # Pages, the API's views of properties and the versions' diff: masked.
    assert redact(clear)[key] == (REDACTED if secret else VALUE)
    assert (key in secret_keys(clear)) is secret
    # The worker decrypts an ENC(...) value only under a secret's name.
    assert holds_secret(key) is secret
    # The pipeline's error text and traceback: the value is masked.
    error = ValueError(f"connect refused for {VALUE}")
    message = describe_exception(error, Properties(clear))
    assert (VALUE in message) is not secret and ("***" in message) is secret
    assert (VALUE in describe_traceback(error, Properties(clear))) is not secret
    # The job's log hides the decrypted value of every key the pages mask (the worker leaves an
    # ENC(...) value of any other key sealed, as it was).
    stored = {key: "ENC(stand-in)"}
    decrypted = {key: VALUE if holds_secret(key) else stored[key]}
    assert secret_values(stored, decrypted) == ({VALUE} if secret else set())


def test_the_flow_page_and_the_api_treat_both_keys_as_the_rule_says(world: World):
    flow = world.victor_flow
    wrapped = world.victor_key.wrapped_key
    flow.properties = {
        **flow.properties,
        "s3.access.key": services.encrypt_value(wrapped, VALUE),
        "fork.one.pass": "false",
    }
    flow.save()
    page = Client()
    page.force_login(world.victor)
    html = page.get(f"/flows/{flow.flow_group}/{flow.flow_name}/").content.decode()
    assert '<code>fork.one.pass</code></td><td data-label="Value"><code>false</code>' in html
    assert '<code>s3.access.key</code></td><td data-label="Value"><span class="masked">' in html
    assert VALUE not in html

    refused = world.post_flow({"s3.access.key": VALUE})
    assert refused.status_code == 400 and "'s3.access.key'" in str(refused.json())
    assert VALUE not in str(refused.json())
    accepted = world.post_flow({"fork.one.pass": "false"})
    assert accepted.status_code == 201, accepted.content
