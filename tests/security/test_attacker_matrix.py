"""Mallory, an ordinary account, tries every way the issue found to reach
another team's data or the portal's secrets. Each attempt is refused at save
(400 naming the key) and again on the worker (the job fails with the reason
before anything is read or written)."""

from __future__ import annotations

import sys

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from portal.flows.compiler import compile_flow
from portal.flows.models import FlowConfig
from portal.keys import services
from portal.orchestration.worker import guard
from portal.pipeline.classloading import PACKAGES_ENV, ClassLoadError, load_class
from portal.pipeline.propertyrules import NODE_KEYS
from portal.topology.models import DataNode
from tests.builders.api import api_client_for
from tests.builders.world import SECRET, World, files_under
from tests.factories import UserFactory
from tests.unit.templatepacks.factories import make_pack

REFUSED = "Refused by the worker's security check"
NON_USER_KEYS = sorted(
    {
        *NODE_KEYS,
        "writer.staging.dir.0",
        "data.publisher.final.dir.1",
        "flowport.hop.source.path",
        "flowport.hop.destination.path",
        "flowport.executor.queue",
        "spark.driver.extraJavaOptions",
        "spark.master",
    }
)


def messages(response) -> str:
    return str(response.json())


# --- 1. keys only the data nodes set ----------------------------------------------------------


@pytest.mark.parametrize("key", NON_USER_KEYS)
def test_a_key_only_a_node_sets_is_refused_at_save_naming_it(world: World, key):
    response = world.post_flow({key: "/etc"})
    assert response.status_code == 400, response.content
    assert repr(key) in messages(response)
    assert not FlowConfig.objects.filter(flow_group="mal", flow_name="other").exists()


def _pack_past_the_upload_check(world: World, path: str, text: str) -> None:
    """A pack version written without the upload checks (one saved before they existed, or a
    row written by hand), so the compiler's own check is what is tested."""
    from portal.templatepacks import services as packs
    from portal.templatepacks.models import PackVersion

    pack = make_pack(world.mallory, name="mal-pack", templates={"ok.template": "a = b\n"})
    packs._new_version(pack, world.mallory, {path: text}, PackVersion.Kind.UPLOAD, "by hand")


@pytest.mark.parametrize(
    "key", ["source.files.path", "data.publisher.final.dir", "writer.output.dir", "source.jdbc.url"]
)
def test_a_key_only_a_node_sets_is_refused_from_a_template(world: World, key):
    with pytest.raises(ValidationError) as refused:
        make_pack(world.mallory, name="mal-pack", templates={"evil.template": f'{key} = "/etc"\n'})
    assert repr(key) in str(refused.value)
    _pack_past_the_upload_check(world, "evil.template", f'{key} = "/etc"\n')
    flow = FlowConfig(
        flow_group="mal",
        flow_name="t",
        owner=world.mallory,
        source="landing",
        destinations=["lake"],
        template_uris="pack://mal-pack/evil.template",
        properties={},
    )
    compiled = compile_flow(flow)
    assert compiled.status == "FAILED"
    assert repr(key) in compiled.message and "a template may not set it" in compiled.message


def test_the_untampered_job_passes_the_workers_check(world: World):
    execution, spec = world.bound_spec()
    job = type(
        "Job", (), {"execution": execution, "job_name": spec["job_name"], "parents": [], "executor": "x1"}
    )
    assert guard.refusal(job, spec) is None
    assert spec["properties"]["data.publisher.final.dir"] == f"{world.lake}/mal/grab"
    assert spec["properties"]["source.files.path"] == str(world.landing)


def _tampered(world: World) -> dict[str, dict[str, str]]:
    victim_ns = str(world.lake / "team-v" / "orders")
    return {
        "/etc as the source": {"source.files.path": "/etc"},
        "'..' out of the source node": {"source.files.path": f"{world.landing}/../lake/team-v/orders"},
        "the master key's folder": {"source.files.path": str(world.master_key.parent)},
        "publish into another flow's namespace": {"data.publisher.final.dir": victim_ns},
        "publish outside every node": {"data.publisher.final.dir": str(world.tmp / "elsewhere")},
        "staging outside the work area": {"writer.staging.dir": "/etc/flowport"},
        "task output outside the work area": {"writer.output.dir": str(world.tmp / "elsewhere")},
        "err file outside the work area": {"qualitychecker.row.err.file": "/etc/err"},
        "the portal's database as source": {"source.jdbc.url": "jdbc:postgresql://127.0.0.1:5432/flowport"},
        "a JDBC writer": {"writer.jdbc.url": "jdbc:postgresql://127.0.0.1:5432/flowport"},
        "Spark conf from the flow": {"spark.driver.extraJavaOptions": "-Dx=y"},
        "a node's path rewritten": {"flowport.hop.source.path": "/etc"},
        "a module outside the allowed packages": {"fork.operator.class": "this.X"},
        "a dataset name with '..'": {"dataset.urn": "../team-v"},
        "a clear secret": {"writer.jdbc.password": "hunter2"},
    }


@pytest.mark.parametrize(
    "case",
    [
        "/etc as the source",
        "'..' out of the source node",
        "the master key's folder",
        "publish into another flow's namespace",
        "publish outside every node",
        "staging outside the work area",
        "task output outside the work area",
        "err file outside the work area",
        "the portal's database as source",
        "a JDBC writer",
        "Spark conf from the flow",
        "a node's path rewritten",
        "a module outside the allowed packages",
        "a dataset name with '..'",
        "a clear secret",
    ],
)
def test_a_tampered_jobspec_is_refused_on_the_worker_before_anything_is_read_or_written(world: World, case):
    before = files_under(world.lake)
    execution, spec = world.bound_spec()
    spec["properties"].update(_tampered(world)[case])
    sys.modules.pop("this", None)
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED"
    assert REFUSED in job.message
    assert files_under(world.lake) == before  # nothing published, the victim's files untouched
    assert not (world.tmp / "elsewhere").exists()
    assert not (world.tmp / "work" / "mal").exists()  # not even task staging
    assert "this" not in sys.modules  # nothing imported


def test_the_work_folder_of_another_flow_is_refused_on_the_worker(world: World):
    execution, spec = world.bound_spec()
    spec["work_dir"] = str(world.tmp / "work" / "team-v" / "orders")
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and "work_dir" in job.message


def test_a_symlink_into_another_flows_namespace_is_refused_on_the_worker(world: World):
    (world.lake / "mal").mkdir()
    (world.lake / "mal" / "grab").symlink_to(world.lake / "team-v" / "orders")
    before = files_under(world.lake / "team-v")
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and "own namespace" in job.message
    assert files_under(world.lake / "team-v") == before


def test_a_symlinked_node_root_out_to_etc_is_refused_on_the_worker(world: World):
    (world.lake / "mal").mkdir()
    (world.lake / "mal" / "grab").symlink_to("/etc")
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and REFUSED in job.message


# --- 3. the portal's own database and secrets ---------------------------------------------------


def _portal_db_url(host: str | None = None, name: str | None = None) -> str:
    db = connection.settings_dict
    return f"jdbc:postgresql://{host or db['HOST']}:{db['PORT'] or 5432}/{name or db['NAME']}"


@pytest.mark.postgres  # the portal's PostgreSQL database by host name
@pytest.mark.parametrize("host", [None, "localhost", "127.0.0.1"])
def test_the_portal_database_cannot_be_a_data_node(world: World, host):
    staff = api_client_for(UserFactory(username="stella", is_staff=True))
    body = {"name": "portal-db", "kind": "jdbc", "properties": {"url": _portal_db_url(host)}}
    response = staff.post("/api/datanodes", body, format="json")
    assert response.status_code == 400, response.content
    assert "portal's own database" in messages(response)
    assert not DataNode.objects.filter(name="portal-db").exists()


def test_another_database_on_the_same_server_may_be_a_data_node(world: World):
    staff = api_client_for(UserFactory(username="stella", is_staff=True))
    body = {"name": "sales-db", "kind": "jdbc", "properties": {"url": _portal_db_url(name="sales")}}
    assert staff.post("/api/datanodes", body, format="json").status_code == 201


def test_no_data_node_may_contain_the_master_key(world: World):
    staff = api_client_for(UserFactory(username="stella", is_staff=True))
    for path in (str(world.master_key.parent), str(world.tmp), f"{world.lake}/../portal-secrets"):
        body = {"name": "keys", "kind": "files", "properties": {"path": path}}
        response = staff.post("/api/datanodes", body, format="json")
        assert response.status_code == 400, (path, response.content)
    assert not DataNode.objects.filter(name="keys").exists()


def test_a_worker_refuses_to_start_and_to_run_while_a_node_reaches_the_master_key(world: World):
    assert guard.startup_problems() == []
    DataNode.objects.filter(name="landing").update(properties={"path": str(world.master_key.parent)})
    assert any("master key" in line for line in guard.startup_problems())
    with pytest.raises(SystemExit):
        guard.refuse_to_start()
    execution, spec = world.bound_spec()
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and "master key" in job.message


# --- 4. secrets bound to their owner -------------------------------------------------------------


def test_nobody_mints_enc_values_under_someone_elses_key(world: World):
    response = world.api().post(
        "/api/keys/encrypt", {"wrappedKey": world.victor_key.wrapped_key, "plaintext": "x"}, format="json"
    )
    assert response.status_code == 400 and "only a key's owner" in messages(response)
    mine = world.api(world.victor).post(
        "/api/keys/encrypt", {"wrappedKey": world.victor_key.wrapped_key, "plaintext": "x"}, format="json"
    )
    assert mine.status_code == 200


@pytest.mark.parametrize("prefix", ["", "source."])
def test_another_owners_enc_value_and_key_are_refused_at_save(world: World, prefix):
    stolen = world.victor_flow.properties
    properties = {
        "source.conn.password": stolen["source.conn.password"],
        f"{prefix}encrypt.wrapped.key": stolen["encrypt.wrapped.key"],
    }
    if prefix:  # her own key for the flow, the victim's for the prefix whose values it decrypts
        own = services.wrap_customer_key(user=world.mallory, generate=True, label="mine").customer_key
        properties["encrypt.wrapped.key"] = own.wrapped_key
    response = world.post_flow(properties)
    assert response.status_code == 400
    assert f"{prefix}encrypt.wrapped.key' is not one of the flow owner's customer keys" in messages(response)


def test_a_template_cannot_carry_enc_values_or_wrapped_keys(world: World):
    stolen = world.victor_flow.properties
    text = (
        f'source.conn.password = "{stolen["source.conn.password"]}"\n'
        f'encrypt.wrapped.key = "{stolen["encrypt.wrapped.key"]}"\n'
    )
    with pytest.raises(ValidationError) as refused:
        make_pack(world.mallory, name="mal-pack", templates={"steal.template": text})
    assert "templates cannot carry" in str(refused.value)
    _pack_past_the_upload_check(world, "steal.template", text)
    response = world.post_flow({}, templateUris="pack://mal-pack/steal.template")
    assert response.status_code == 400  # it could never compile, so it is not saved
    assert "templates cannot carry" in str(response.json()), response.json()
    assert not FlowConfig.objects.filter(flow_group="mal", flow_name="other").exists()


def test_the_worker_decrypts_only_with_the_flow_owners_keys(world: World):
    execution, spec = world.bound_spec()
    stolen = world.victor_flow.properties
    spec["properties"]["source.conn.password"] = stolen["source.conn.password"]
    spec["properties"]["encrypt.wrapped.key"] = stolen["encrypt.wrapped.key"]
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and "not one of the flow owner's customer keys" in job.message
    assert SECRET not in job.message and SECRET not in job.log_excerpt


@pytest.mark.parametrize("key", ["writer.jdbc.password", "source.conn.password", "my.api.key", "oauth.token"])
def test_a_secret_named_key_is_refused_in_clear_without_any_template(world: World, key):
    response = world.post_flow({key: "hunter2"})
    assert response.status_code == 400 and repr(key) in messages(response)
    assert "hunter2" not in messages(response)


def test_words_that_only_look_like_secrets_are_not(world: World):
    response = world.post_flow({"fork.one.pass": "false", "extract.primary.key.fields": "id"})
    assert response.status_code == 201, response.content


# --- 5. pluggable code only from allowed packages -------------------------------------------------


def test_a_class_outside_the_allowed_packages_is_refused_at_save_before_any_import(world: World):
    sys.modules.pop("this", None)
    response = world.post_flow({"fork.operator.class": "this.X"})
    assert response.status_code == 400 and "fork.operator.class" in messages(response)
    assert "this" not in sys.modules
    with pytest.raises(ClassLoadError, match="outside the packages"):
        load_class("this.X", "fork.operator.class")
    assert "this" not in sys.modules


def test_tests_are_not_importable_in_a_portal_that_does_not_list_them(world: World, monkeypatch):
    monkeypatch.delenv(PACKAGES_ENV)
    response = world.post_flow({"source.class": "tests.integration.sources.CountingSource"})
    assert response.status_code == 400 and "source.class" in messages(response)
    with pytest.raises(ClassLoadError):
        load_class("tests.integration.sources.CountingSource", "source.class")
    execution, spec = world.bound_spec()
    spec["properties"]["source.class"] = "tests.integration.sources.CountingSource"
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and "source.class" in job.message


def test_built_in_classes_stay_usable(world: World):
    response = world.post_flow({"source.class": "portal.pipeline.sources.files.FileSource"})
    assert response.status_code == 201, response.content


# --- 6. bounded input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("properties", "words"),
    [
        ({"a\x00b": "x"}, "control character"),
        ({"a\x1bb": "x"}, "control character"),
        ({"a": "x\x00y"}, "Null characters are not allowed"),
        ({"a": "x\x07y"}, "control character"),
    ],
)
def test_control_characters_in_properties_are_400_naming_them(world: World, properties, words):
    response = world.post_flow(properties)
    assert response.status_code == 400, response.content
    assert words in messages(response)


@pytest.mark.parametrize("field", ["description", "schedule", "templateUris"])
def test_a_null_byte_in_any_field_is_400_not_500(world: World, field):
    response = world.post_flow({}, **{field: "x\x00y"})
    assert response.status_code == 400, response.content


def test_deeply_nested_json_is_400_naming_the_limit(world: World):
    body = '{"flowGroup": "mal", "flowName": "deep", "properties": ' + "[" * 5000 + "]" * 5000 + "}"
    response = world.api().post("/api/flowconfigs", body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert "deeper than 32 levels" in messages(response)


def _bomb(levels: int = 12) -> str:
    lines = ['a = "' + "x" * 50 + '"']
    previous = "a"
    for i in range(levels):
        lines.append(f"l{i} = " + "${" + previous + "}" * 1 + ("${" + previous + "}") * 3)
        previous = f"l{i}"
    return "\n".join(lines) + "\n"


def test_a_substitution_bomb_is_refused_naming_the_limit_and_expands_nothing(world: World):
    text = _bomb()
    assert len(text) < 1024
    with pytest.raises(ValidationError, match=r"65536 characters \(the limit\)"):
        make_pack(world.mallory, name="mal-pack", templates={"bomb.template": text})
    _pack_past_the_upload_check(world, "bomb.template", text)  # the compile's own check
    response = world.api().post(
        "/api/flowconfigs/compile",
        {
            "flowGroup": "mal",
            "flowName": "bomb",
            "source": "landing",
            "destinations": ["lake"],
            "templateUris": "pack://mal-pack/bomb.template",
            "properties": {},
        },
        format="json",
    )
    assert response.status_code in (200, 400), response.content[:300]
    assert len(response.content) < 20_000
    assert "65536 characters (the limit)" in response.content.decode()


def test_substitutions_nested_too_deep_are_refused_naming_the_limit(world: World):
    text = 'v0 = "x"\n' + "".join(f"v{i} = ${{v{i - 1}}}\n" for i in range(1, 30))
    with pytest.raises(ValidationError, match=r"nest deeper than 16 levels \(the limit\)"):
        make_pack(world.mallory, name="mal-pack", templates={"deep.template": text})
    _pack_past_the_upload_check(world, "deep.template", text)  # the compile's own check
    response = world.api().post(
        "/api/flowconfigs/compile",
        {
            "flowGroup": "mal",
            "flowName": "deep",
            "source": "landing",
            "destinations": ["lake"],
            "templateUris": "pack://mal-pack/deep.template",
            "properties": {},
        },
        format="json",
    )
    assert "nest deeper than 16 levels (the limit)" in response.content.decode()


# --- 1. data nodes only through grants -------------------------------------------------------------


def _ungrant(world: World, node: str, user: str, role: str) -> None:
    from portal.topology.models import DataNodeGrant

    DataNodeGrant.objects.filter(node__name=node, user__username=user, role=role).delete()


@pytest.mark.parametrize(
    ("node", "role", "words"), [("landing", "read", "read from"), ("lake", "write", "write to")]
)
def test_a_flow_whose_owner_lacks_a_grant_does_not_compile_nor_run(world: World, node, role, words):
    execution, spec = world.bound_spec()  # bound while she still had the grant
    _ungrant(world, node, "mallory", role)
    compiled = compile_flow(world.mallory_flow)
    assert compiled.status == "FAILED"
    assert f"'mallory' may not {words} data node '{node}'" in compiled.message
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and f"may not {words} data node '{node}'" in job.message
    assert not (world.lake / "mal").exists()


def test_a_node_without_grants_is_closed_to_all_but_staff(world: World):
    from portal.topology import services as topology

    topology.create_data_node(
        {"name": "vault", "kind": "files", "properties": {"path": str(world.tmp / "vault")}}
    )
    from tests.unit.topology.helpers import executor as make_executor

    make_executor("x2", "vault>lake")
    flow = FlowConfig(
        flow_group="mal",
        flow_name="v",
        owner=world.mallory,
        source="vault",
        destinations=["lake"],
        properties={},
    )
    assert "may not read from data node 'vault'" in compile_flow(flow).message
    staff = UserFactory(username="stella", is_staff=True)
    assert compile_flow(flow, user=staff).status == "COMPILED"


def test_a_group_grant_lets_its_members_in(world: World):
    from django.contrib.auth.models import Group

    from portal.topology import grants

    _ungrant(world, "landing", "mallory", "read")
    assert compile_flow(world.mallory_flow).status == "FAILED"
    team = Group.objects.create(name="team-m")
    world.mallory.groups.add(team)
    node = DataNode.objects.get(name="landing")
    grants.set_grants(node, [*grants.grant_entries(node), {"role": "read", "group": "team-m"}])
    assert compile_flow(world.mallory_flow).status == "COMPILED"


def test_only_staff_change_a_nodes_grants(world: World):
    body = {"acl": [{"role": "owner", "user": "mallory"}]}
    response = world.api().patch("/api/datanodes/landing", body, format="json")
    assert response.status_code == 403
    staff = api_client_for(UserFactory(username="stella", is_staff=True))
    response = staff.patch("/api/datanodes/landing", body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["acl"] == [{"role": "owner", "user": "mallory"}]
    bad = staff.patch("/api/datanodes/landing", {"acl": [{"role": "admin", "user": "x"}]}, format="json")
    assert bad.status_code == 400 and "acl" in str(bad.json())


# --- 2. a flow group is owned ----------------------------------------------------------------------


def test_nobody_creates_flows_in_a_flow_group_they_do_not_own(world: World):
    response = world.post_flow({}, flowGroup="team-v", flowName="squat")
    assert response.status_code == 400
    assert "flow group 'team-v' belongs to user victor" in messages(response)
    assert not FlowConfig.objects.filter(flow_group="team-v", flow_name="squat").exists()


def test_the_worker_refuses_a_flow_in_someone_elses_group(world: World):
    squat = FlowConfig.objects.create(  # past the web tier, straight into the database
        flow_group="team-v",
        flow_name="squat",
        owner=world.mallory,
        source="landing",
        destinations=["lake"],
        properties={"source.files.format": "csv"},
    )
    execution, spec = world.bound_spec(squat)
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and "belongs to user victor" in job.message
    assert not (world.lake / "team-v" / "squat").exists()


def test_a_group_owned_flow_group_admits_its_members_only(world: World):
    from django.contrib.auth.models import Group

    from portal.flows.models import FlowGroup

    team = Group.objects.create(name="team-shared")
    FlowGroup.objects.create(name="shared", owner_group=team)
    assert world.post_flow({}, flowGroup="shared", flowName="a").status_code == 400
    world.mallory.groups.add(team)
    assert world.post_flow({}, flowGroup="shared", flowName="a").status_code == 201


def test_a_new_flow_group_is_claimed_by_its_first_flows_owner(world: World):
    from portal.flows.models import FlowGroup

    assert world.post_flow({}, flowGroup="fresh", flowName="a").status_code == 201
    assert FlowGroup.objects.get(name="fresh").owner_user == world.mallory
    response = world.post_flow({}, user=world.victor, flowGroup="fresh", flowName="b")
    assert response.status_code == 400


@pytest.mark.postgres  # the portal's PostgreSQL database as a node
def test_a_portal_database_node_written_past_the_checks_stops_the_worker(world: World):
    DataNode.objects.filter(name="landing").update(
        kind="jdbc", properties={"url": _portal_db_url("localhost")}
    )
    assert any("portal's own database" in line for line in guard.startup_problems())
    execution, spec = world.bound_spec()
    assert spec["properties"]["source.jdbc.url"] == _portal_db_url("localhost")
    job = world.run_on_worker(spec, execution)
    assert job.status == "FAILED" and "portal's own database" in job.message
    assert files_under(world.lake / "mal") == []
