"""Mallory, an ordinary account, writes small templates that HOCON would grow into hundreds of
megabytes, and uses ENC(...) values where no secret belongs to read them back in clear.

Every growing template is refused, naming the template, the key and the limit, at pack upload or
edit when the template alone grows, and at flow save or compile when it grows with its parents or
the flow's values; the refusal allocates little (measured with tracemalloc, not timed). An ENC(...)
value in a key that holds no secret is refused at save, and a JobSpec tampered past the save leaves
it sealed on the worker: its clear text is in no progress, message, log or API answer."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.forms.models import model_to_dict

from portal.crypto.encrypted import decrypt_properties
from portal.flows.compiler import compile_flow
from portal.flows.models import FlowConfig
from portal.keys import services as keys
from portal.orchestration.state.joblogs import log_path
from portal.templatepacks.models import PackVersion
from tests.builders.world import World, files_under
from tests.unit.templatepacks.factories import make_pack, stored_pack

VALUE_LIMIT = "65536 characters (the limit)"
TOTAL_LIMIT = "1048576 characters (the limit)"
LIMITS = (VALUE_LIMIT, TOTAL_LIMIT, "values (the limit)", "levels (the limit)", "keys (the limit)")
# What answering a refusal may allocate: pyparsing's grammar and Django's request, not the expansion.
MAX_PEAK = 48 * 1024 * 1024


def doubling(times: int, first: str = 'a = "xxxxx"') -> str:
    """The issue's template: 370 bytes that pyhocon expanded to 671 MB (5 x 2^27 characters)."""
    return first + "\n" + "a = ${a}${a}\n" * times


# Each a few hundred bytes; each grows past the limits through another HOCON feature.
GROWERS = {
    "a string concatenated with itself": doubling(27),
    "a list concatenated with itself": "a = [xxxxx]\n" + "a = ${a} ${a}\n" * 24,
    "a dotted key concatenated with itself": 'b.a = "xxxxx"\n' + "b.a = ${b.a}${b.a}\n" * 27,
    "an object key inside an object": 'b { a = "xxxxx" }\n' + "b { a = ${b.a}${b.a} }\n" * 27,
    "an object merged with itself": "a { x = xxxxx }\n" + "a = ${a} { y = ${a} }\n" * 24,
    "an object merged with itself twice": (
        "a { x = xxxxx }\n" + "".join(f"a = ${{a}} {{ y{i} = ${{a}} }}\n" for i in range(24))
    ),
    "an object extended again and again": "a { x = xxxxx }\n" + "a = ${a} { y = 1 }\n" * 30,
    "substitutions into many keys": (
        'a = "' + "x" * 60_000 + '"\n' + "".join(f"k{i} = ${{a}}\n" for i in range(40))
    ),
    # No substitution: pyhocon copies the object for each statement adding to it (n²/2 copies).
    "an object added to one statement at a time": "".join(f"a.k{i} = v\n" for i in range(600)),
}


def peak_of(call: Callable[[], Any]) -> tuple[Any, int]:
    """`call()`'s result and the most memory Python held at once while it ran (bytes)."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def refused_at_upload(world: World, templates: dict[str, str]) -> str:
    try:
        make_pack(world.mallory, name="mal-pack", templates=templates)
    except ValidationError as error:
        return " ".join(error.messages)
    raise AssertionError("the pack was accepted")


def compile_answer(world: World, uri: str, properties: dict[str, str] | None = None):
    return world.api().post(
        "/api/flowconfigs/compile",
        {
            "flowGroup": "mal",
            "flowName": "bomb",
            "source": "landing",
            "destinations": ["lake"],
            "templateUris": uri,
            "properties": {"source.files.format": "csv", **(properties or {})},
        },
        format="json",
    )


# --- templates that grow ----------------------------------------------------------------------


@pytest.mark.parametrize("how", sorted(GROWERS))
def test_a_template_that_grows_by_itself_is_refused_at_upload(world: World, how):
    text = GROWERS[how]
    assert len(text) < 1024 or how in (
        "substitutions into many keys",
        "an object added to one statement at a time",
    )
    message, peak = peak_of(lambda: refused_at_upload(world, {"grow.template": text}))
    assert "grow.template" in message and any(limit in message for limit in LIMITS), message
    assert peak < MAX_PEAK, f"{peak / 2**20:.0f} MiB"
    assert not PackVersion.objects.filter(pack__name="mal-pack").exists()


def test_the_issues_template_is_refused_at_edit_naming_the_template_key_and_limit(world: World):
    make_pack(world.mallory, name="mal-pack", templates={"ok.template": "a = b\n"})
    text = doubling(27)
    assert len(text) < 400
    response, peak = peak_of(
        lambda: world.api().put(
            "/api/templatepacks/mal-pack/templates/bomb.template", {"text": text}, format="json"
        )
    )
    assert response.status_code == 400, response.content[:300]
    said = response.content.decode()
    assert len(said) < 2_000
    assert "bomb.template" in said and "'a'" in said and VALUE_LIMIT in said, said
    assert peak < MAX_PEAK, f"{peak / 2**20:.0f} MiB"


@pytest.mark.parametrize("how", sorted(GROWERS))
def test_a_growing_template_stored_past_the_upload_check_is_refused_at_compile(world: World, how):
    stored_pack(world.mallory, "old-pack", {"grow.template": GROWERS[how]})
    response, peak = peak_of(lambda: compile_answer(world, "pack://old-pack/grow.template"))
    said = response.content.decode()
    assert len(said) < 20_000
    assert "pack://old-pack/grow.template" in said and any(limit in said for limit in LIMITS), said[:500]
    assert peak < MAX_PEAK, f"{peak / 2**20:.0f} MiB"


def test_a_template_that_grows_through_its_parents_is_refused_at_flow_save(world: World):
    """Each template doubles what its parent gives; the chain is 28 templates long (the limit
    is 32 levels of parents)."""
    templates = {"t0.template": 'a = "xxxxx"\n'}
    for level in range(1, 28):
        templates[f"t{level}.template"] = (
            f'gobblin.template.inherit = "t{level - 1}.template"\na = ${{a}}${{a}}\n'
        )
    make_pack(world.mallory, name="mal-pack", templates=templates)
    response, peak = peak_of(
        lambda: world.post_flow({}, flowName="chain", templateUris="pack://mal-pack/t27.template")
    )
    assert response.status_code == 400, response.content[:300]
    said = response.content.decode()
    assert "pack://mal-pack/t27.template" in said and "'a'" in said and VALUE_LIMIT in said, said[:500]
    assert peak < MAX_PEAK, f"{peak / 2**20:.0f} MiB"
    assert not FlowConfig.objects.filter(flow_name="chain").exists()


def test_a_template_that_grows_from_the_flows_value_is_refused_at_flow_save(world: World):
    """Alone, the template resolves small (64 empty elements); the flow's 60 KB value makes it
    3.8 MB."""
    text = "a = [${seed}]\n" + "a = ${a} ${a}\n" * 6
    make_pack(world.mallory, name="mal-pack", templates={"grow.template": text})
    response, peak = peak_of(
        lambda: world.post_flow(
            {"seed": "x" * 60_000}, flowName="seeded", templateUris="pack://mal-pack/grow.template"
        )
    )
    assert response.status_code == 400, response.content[:300]
    said = response.content.decode()
    assert "pack://mal-pack/grow.template" in said and "${seed}" in said and TOTAL_LIMIT in said, said
    assert peak < MAX_PEAK, f"{peak / 2**20:.0f} MiB"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/templates/resolve", {"templateUri": "pack://old-pack/grow.template", "properties": {}}),
    ],
)
def test_the_template_preview_refuses_a_growing_template_too(world: World, path, body):
    stored_pack(world.mallory, "old-pack", {"grow.template": doubling(27)})
    response, peak = peak_of(lambda: world.api().post(path, body, format="json"))
    assert response.status_code == 400, response.content[:300]
    assert VALUE_LIMIT in response.content.decode()
    assert peak < MAX_PEAK, f"{peak / 2**20:.0f} MiB"


def test_a_template_within_the_limits_still_resolves(world: World):
    make_pack(world.mallory, name="mal-pack", templates={"ok.template": doubling(10)})
    flow = FlowConfig(
        flow_group="mal",
        flow_name="ok",
        owner=world.mallory,
        source="landing",
        destinations=["lake"],
        template_uris="pack://mal-pack/ok.template",
        properties={"source.files.format": "csv"},
    )
    compiled = compile_flow(flow)
    assert compiled.status == "COMPILED", compiled.message
    assert compiled.jobs[0].properties["a"] == "xxxxx" * 2**10


# --- ENC(...) values where no secret belongs --------------------------------------------------

TEAM_SECRET = "team-db-password-4711"
NAME_KEYS = ["dataset.urn", "source.files.datasets", "source.jdbc.tables", "writer.jdbc.table"]


@pytest.fixture
def team_key(world: World):
    """A customer key of victor's team, mallory among its members: she may use the team's
    secrets in her flows (the worker decrypts them), never read them. The key is one whose
    ENC(...) values can be spelled without a '/' (see team_secret): the value's header (format
    version, the key's check bytes, the owner) is the same in every encryption, so a key whose
    header encodes to a '/' never yields one, and is set aside for another."""
    team = Group.objects.create(name="team")
    team.user_set.add(world.victor, world.mallory)
    for attempt in range(20):
        key = keys.wrap_customer_key(user=world.victor, generate=True, label=f"team-{attempt}", group="team")
        if _folder_safe(key.customer_key):
            return key.customer_key
    raise AssertionError("20 customer keys in a row had a '/' in their ENC(...) header")


def _folder_safe(team_key) -> str | None:
    """One of the team password's encryptions with no '/' in its base64, if a few tries find one
    (the nonce and ciphertext are random, so each try has a fair chance when the header allows)."""
    for _ in range(200):
        value = keys.encrypt_value(team_key.wrapped_key, TEAM_SECRET, team_key.binding)
        if "/" not in value:
            return value
    return None


def team_secret(team_key) -> str:
    """The team's password as an ENC(...) value that is also a plain folder name (no '/' in its
    base64), so nothing but the decryption stands between it and a dataset."""
    value = _folder_safe(team_key)
    assert value is not None, "the team key was chosen for folder-safe values"
    return value


@pytest.mark.parametrize("key", NAME_KEYS)
def test_a_teams_secret_as_a_name_is_refused_at_save_naming_the_key(world: World, team_key, key):
    secret = team_secret(team_key)
    as_password = {"source.conn.password": secret, "encrypt.wrapped.key": team_key.wrapped_key}
    assert world.post_flow(as_password, flowName="ok").status_code == 201  # hers to use
    response = world.post_flow(
        {
            key: secret,
            "encrypt.wrapped.key": team_key.wrapped_key,
            # Declaring it encrypted changes nothing: the pipeline reads it as a name.
            "gobblin.template.encrypted_attributes": key,
        }
    )
    assert response.status_code == 400, response.content[:300]
    said = str(response.json())
    # dataset.urn is refused for its spelling already (a plain name); the others for the ENC(...).
    assert (
        f"{key!r} is an ENC(...) value but holds no secret" in said or f"{key!r} must be a plain name" in said
    )
    assert TEAM_SECRET not in response.content.decode()
    assert not FlowConfig.objects.filter(flow_name="other").exists()


def test_a_teams_secret_substituted_into_a_name_by_a_template_is_refused_at_save(world: World, team_key):
    make_pack(world.mallory, name="mal-pack", templates={"names.template": "dataset.urn = ${db.password}\n"})
    response = world.post_flow(
        {"db.password": team_secret(team_key), "encrypt.wrapped.key": team_key.wrapped_key},
        templateUris="pack://mal-pack/names.template",
    )
    assert response.status_code == 400, response.content[:300]
    assert "'dataset.urn' is an ENC(...) value" in str(response.json())


def test_a_teams_secret_as_a_dataset_stays_sealed_on_the_worker(transactional_db, world: World, team_key):
    """A JobSpec tampered past the save: the team's password names the dataset to read, and a
    folder of that name waits in the landing node. The worker does not decrypt it, so its clear
    text is in no progress, message, log, API answer or published path."""
    folder = world.landing / TEAM_SECRET
    folder.mkdir()
    (folder / "part-1.csv").write_text("id,amount\n7,4711\n")
    execution, spec = world.bound_spec()
    spec["properties"].update(
        {
            "source.files.datasets": team_secret(team_key),
            "encrypt.wrapped.key": team_key.wrapped_key,
            "gobblin.template.encrypted_attributes": "source.files.datasets",
        }
    )
    job = world.run_on_worker(spec, execution)

    seen = {
        "job row": json.dumps(model_to_dict(job), default=str),
        "execution API": world.api().get(f"/api/flowexecutions/{execution.execution_id}").content.decode(),
        "job log": log_path(execution.execution_id, job.job_name, 1).read_text(),
        "published": " ".join(str(path) for path in files_under(world.lake)),
    }
    assert [where for where, text in seen.items() if TEAM_SECRET in text] == []
    # Sealed, it names no folder there is: nothing was read (decrypted, it named the one read).
    assert "0 record(s) delivered" in job.message, job.message
    assert "4711" not in "".join(path.read_text() for path in files_under(world.lake))


def test_the_worker_still_decrypts_the_teams_password_where_a_secret_belongs(world: World, team_key):
    secret = team_secret(team_key)
    properties = {
        "source.conn.password": secret,
        "source.conn.username": secret,
        "dataset.urn": secret,
        "encrypt.wrapped.key": team_key.wrapped_key,
    }
    plain = decrypt_properties(properties)
    assert plain["source.conn.password"] == plain["source.conn.username"] == TEAM_SECRET
    assert plain["dataset.urn"] == secret
