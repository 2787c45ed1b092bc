"""ENC(...) values are bound to their customer key's owner (AEAD associated
data): victor shares a key with his team, mallory among
them, and keeps a personal secret under the same key. Mallory can use the
team's secrets, never victor's own: refused at save, sealed on the worker,
and tampering with the binding breaks the value. A master key rotation
keeps every binding."""

from __future__ import annotations

import base64

import pytest
from django.contrib.auth.models import Group

from portal.crypto import client
from portal.flows.secrets import validate_flow_secrets
from portal.keys import services
from portal.keys.rotation import rotate_master_key
from tests.builders.world import SECRET, World, files_under

TEAM_SECRET = "team-shared-password"


@pytest.fixture
def shared(world: World):
    """One customer key wrapped twice: victor's own, and his team's (mallory is a member)."""
    team = Group.objects.create(name="team")
    team.user_set.add(world.victor, world.mallory)
    key = client.encode_key(client.generate_key())
    own = services.wrap_customer_key(user=world.victor, key=key, label="shared-own").customer_key
    for_team = services.wrap_customer_key(
        user=world.victor, key=key, label="shared", group="team"
    ).customer_key
    return own, for_team


def encrypt(user, key_id: int, plaintext: str, world: World) -> str:
    response = world.api(user).post(
        "/api/keys/encrypt", {"keyId": key_id, "plaintext": plaintext}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()["value"]


def rebound(value: str, owner: str) -> str:
    """The value with its owner field rewritten (the attacker's edit)."""
    raw = base64.b64decode(value[4:-1])
    end = 6 + raw[5]
    forged = raw[:5] + bytes([len(owner)]) + owner.encode() + raw[end:]
    return f"ENC({base64.b64encode(forged).decode()})"


def test_each_value_names_the_owner_it_is_bound_to(world: World, shared):
    own, for_team = shared
    assert client.owner_of(encrypt(world.victor, own.pk, SECRET, world)) == f"user:{world.victor.pk}"
    assert (
        client.owner_of(encrypt(world.mallory, for_team.pk, TEAM_SECRET, world))
        == f"group:{for_team.owner_group_id}"
    )
    listing = world.api(world.victor).get("/api/keys").json()
    keys = listing["results"] if isinstance(listing, dict) else listing
    assert {k["label"]: k["binding"] for k in keys if k["label"].startswith("shared")} == {
        "shared-own": own.binding,
        "shared": for_team.binding,
    }


def test_a_value_bound_to_another_owner_is_refused_at_save_even_under_a_shared_key(world: World, shared):
    own, for_team = shared
    personal = encrypt(world.victor, own.pk, SECRET, world)
    response = world.post_flow(
        {"source.conn.password": personal, "encrypt.wrapped.key": for_team.wrapped_key}
    )
    assert response.status_code == 400
    assert f"is bound to another owner (user:{world.victor.pk})" in str(response.json())
    assert "source.conn.password" in str(response.json())
    # The team's own secret is hers to use.
    team_value = encrypt(world.victor, for_team.pk, TEAM_SECRET, world)
    ok = world.post_flow({"source.conn.password": team_value, "encrypt.wrapped.key": for_team.wrapped_key})
    assert ok.status_code == 201, ok.content


def test_the_worker_keeps_another_owners_value_sealed(world: World, shared):
    own, for_team = shared
    execution, spec = world.bound_spec()
    spec["properties"]["source.conn.password"] = encrypt(world.victor, own.pk, SECRET, world)
    spec["properties"]["encrypt.wrapped.key"] = for_team.wrapped_key  # a key mallory does hold
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED"
    assert f"is bound to another owner (user:{world.victor.pk})" in job.message
    assert "Its secrets stay sealed" in job.message
    assert SECRET not in job.message and SECRET not in job.log_excerpt
    assert files_under(world.lake / "mal") == []  # nothing written


def test_rewriting_the_binding_breaks_the_value(world: World, shared):
    own, for_team = shared
    forged = rebound(encrypt(world.victor, own.pk, SECRET, world), f"user:{world.mallory.pk}")
    assert client.owner_of(forged) == f"user:{world.mallory.pk}"
    # At save: mallory is not an owner of that key on her own.
    response = world.post_flow({"source.conn.password": forged, "encrypt.wrapped.key": for_team.wrapped_key})
    assert response.status_code == 400
    assert f"bound to user:{world.mallory.pk}, which does not own the key it was made with" in str(
        response.json()
    )
    # And the ciphertext itself refuses: the binding is authenticated data.
    with pytest.raises(services.DecryptionError) as refused:
        services.decrypt_properties({"p.password": forged, "encrypt.wrapped.key": for_team.wrapped_key})
    assert refused.value.code == "tampered_value"


def test_minting_binds_to_the_key_owner_and_needs_to_be_one(world: World, shared):
    own, _ = shared
    refused = world.api().post("/api/keys/encrypt", {"keyId": own.pk, "plaintext": "x"}, format="json")
    assert refused.status_code == 400 and "You have no key with this id" in str(refused.json())
    by_wrapped = world.api().post(
        "/api/keys/encrypt", {"wrappedKey": own.wrapped_key, "plaintext": "x"}, format="json"
    )
    # The same key bytes, but through the team's record: bound to the team, not to victor.
    assert by_wrapped.status_code == 200
    assert client.owner_of(by_wrapped.json()["value"]) == f"group:{Group.objects.get(name='team').pk}"


def test_a_master_key_rotation_keeps_every_binding(world: World, shared):
    own, for_team = shared
    personal = encrypt(world.victor, own.pk, SECRET, world)
    mine = world.api(world.victor).post(
        "/api/flowconfigs",
        {
            "flowGroup": "team-v",
            "flowName": "personal",
            "source": "landing",
            "destinations": ["lake"],
            "properties": {
                "source.files.format": "json",
                "source.conn.password": personal,
                "encrypt.wrapped.key": own.wrapped_key,
            },
        },
        format="json",
    )
    assert mine.status_code == 201, mine.content

    report = rotate_master_key()
    assert not report.failures and report.flows_rewrapped >= 1

    own.refresh_from_db()
    for_team.refresh_from_db()
    flow = world.victor_flow.__class__.objects.get(flow_name="personal")
    assert flow.properties["source.conn.password"] == personal  # values are never touched
    assert services.decrypt_properties(flow.properties)["source.conn.password"] == SECRET
    assert client.owner_of(personal) == f"user:{world.victor.pk}"
    response = world.post_flow(
        {"source.conn.password": personal, "encrypt.wrapped.key": for_team.wrapped_key}
    )
    assert response.status_code == 400 and "is bound to another owner" in str(response.json())


def test_a_legacy_value_without_binding_still_works_for_its_owner(world: World):
    """Values made before the binding (version 1) keep decrypting in the
    flows of the key's holder; another owner's stays refused (their key)."""
    legacy = world.victor_flow.properties["source.conn.password"]
    assert client.owner_of(legacy) is None
    assert services.decrypt_properties(world.victor_flow.properties)["source.conn.password"] == SECRET
    validate_flow_secrets(world.victor_flow)  # no error
    response = world.post_flow(
        {
            "source.conn.password": legacy,
            "encrypt.wrapped.key": world.victor_flow.properties["encrypt.wrapped.key"],
        }
    )
    assert response.status_code == 400 and "is not one of the flow owner's customer keys" in str(
        response.json()
    )
