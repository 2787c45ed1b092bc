"""Every data node kind is bound once (portal.pipeline.nodekinds), and every reader agrees: for
each kind in each role, the keys the launch binds are exactly the keys the worker's guard expects
from the node in the database, and each is a key the source or destination serving the hop reads
(found in its code), with every node-owned key that component requires among them."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from portal.orchestration.control.jobspecs import bind_hop
from portal.orchestration.worker.guard import _expected_node_keys
from portal.pipeline import nodekinds
from portal.pipeline.jobcheck import source_kind, writer_kind
from portal.pipeline.jobspec import with_node_credentials
from portal.pipeline.nodekinds import DESTINATION, KINDS, ROLES, SOURCE
from portal.pipeline.properties import Properties
from portal.pipeline.propertyrules import (
    NODE,
    SOURCE_FILES,
    SOURCE_JDBC,
    WRITER_FILES,
    WRITER_ICEBERG,
    WRITER_JDBC,
    base_key,
    owner_of,
)
from portal.topology.models import DataNode

PIPELINE = Path(__file__).resolve().parents[4] / "portal" / "pipeline"

# A node of each kind with every field set; relative paths, so FLOWPORT_DATA_DIR is exercised.
NODES: dict[str, dict[str, str]] = {
    "files": {"path": "lake"},
    "jdbc": {
        "url": "jdbc:postgresql://db.example.org:5432/sales",
        "driver": "org.postgresql.Driver",
        "user": "sales",
        "password": "decrypted-by-the-worker",
    },
    "iceberg": {"catalog.uri": "sqlite:///lake/catalog.db", "warehouse": "lake/warehouse"},
}
# The component that serves a hop (as jobcheck names it) → the modules that read its keys: the
# first is the component's own, whose required node-owned keys the binding must give.
READERS: dict[str, tuple[str, ...]] = {
    SOURCE_FILES: ("sources/files.py",),
    SOURCE_JDBC: ("sources/jdbc.py",),
    WRITER_FILES: ("destinations/files.py", "destinations/commitplan.py"),
    WRITER_JDBC: ("destinations/jdbc.py", "destinations/commitplan.py"),
    WRITER_ICEBERG: ("destinations/iceberg.py",),
}
GROUP, NAME = "sales", "daily"
CASES = [(kind, role) for kind in KINDS for role in ROLES]


@dataclass
class Job:
    job_name: str = "sales.daily.0-a-to-b"
    parents: list[str] = field(default_factory=list)


def _hop_keys(role: str, name: str, kind: str, properties: dict[str, str]) -> dict[str, str]:
    keys = {f"flowport.hop.{role}": name, f"flowport.hop.{role}.kind": kind}
    keys.update({f"flowport.hop.{role}.{key}": value for key, value in properties.items()})
    return keys


def _hop(kind: str, role: str, **extra: str) -> tuple[dict[str, str], dict[str, DataNode]]:
    """A compiled first hop with a node of `kind` in `role` and a files node in the other: its
    properties as the compiler gives them, and the two nodes as the database holds them."""
    other = DESTINATION if role == SOURCE else SOURCE
    nodes = {
        role: DataNode(name="tested", kind=kind, properties=NODES[kind]),
        other: DataNode(name="other", kind="files", properties={"path": "other"}),
    }
    props = {"flow.group": GROUP, "flow.name": NAME, "job.name": Job.job_name, **extra}
    for node_role, node in nodes.items():
        props.update(_hop_keys(node_role, node.name, node.kind, node.properties))
    return props, nodes


def _node_keys(props: dict[str, str]) -> dict[str, str]:
    """The node-owned keys a bound job holds beside the compiler's hop keys, a branch's ``.N`` as
    its base key (the guard checks each branch's against its base)."""
    return {
        base_key(key): value
        for key, value in props.items()
        if owner_of(key) == NODE and not key.startswith(("flowport.", "spark."))
    }


def _read_keys(module: str) -> tuple[set[str], set[str]]:
    """The keys a module reads (`x.get("k")`, `x.require("k")`, ...) and those it requires."""
    tree = ast.parse((PIPELINE / module).read_text())
    read: set[str] = set()
    required: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            read.add(node.args[0].value)
            if node.func.attr == "require":
                required.add(node.args[0].value)
    return read, required


def _component(props: dict[str, str], role: str) -> str | None:
    bound = Properties(props)
    return source_kind(bound) if role == SOURCE else writer_kind(bound)


def test_every_kind_has_a_node_to_bind_here():
    assert set(NODES) == set(KINDS)


@pytest.mark.parametrize(("kind", "role"), CASES)
@pytest.mark.parametrize("branches", [1, 2])
def test_the_guard_expects_exactly_what_the_launch_binds(kind, role, branches, settings, tmp_path):
    settings.FLOWPORT_DATA_DIR = tmp_path
    props, nodes = _hop(kind, role, **({"fork.branches": str(branches)} if branches > 1 else {}))
    bound = bind_hop({"properties": props}, [], final=True)
    assert _node_keys(bound) == _expected_node_keys(Job(), nodes, GROUP, NAME)
    assert nodekinds.bind(kind, role, NODES[kind], _first_hop(tmp_path)).items() <= _node_keys(bound).items()


def test_a_later_hop_is_expected_to_read_what_its_parent_published(settings, tmp_path):
    settings.FLOWPORT_DATA_DIR = tmp_path
    parent_props, _ = _hop("files", DESTINATION)
    props, nodes = _hop("files", SOURCE)
    later = Job(parents=["first"])
    bound = bind_hop({"properties": props}, [{"properties": parent_props}], final=True)
    assert bound["source.files.path"] == f"{tmp_path}/lake/{GROUP}/{NAME}"
    assert _node_keys(bound) == _expected_node_keys(later, nodes, GROUP, NAME)


def _first_hop(data_dir: Path) -> nodekinds.Hop:
    return nodekinds.Hop(flow_group=GROUP, flow_name=NAME, data_dir=str(data_dir))


@pytest.mark.parametrize(("kind", "role"), CASES)
def test_what_is_bound_is_what_the_source_or_destination_reads(kind, role, settings, tmp_path):
    settings.FLOWPORT_DATA_DIR = tmp_path
    props, _ = _hop(kind, role)
    bound = with_node_credentials(bind_hop({"properties": props}, [], final=True))
    given = {base_key(key) for key in nodekinds.bind(kind, role, NODES[kind], _first_hop(tmp_path))}
    given |= set(nodekinds.credentials(kind, role, NODES[kind]))
    if not given:  # a kind not read (or written) in this role binds nothing for it
        assert (kind, role) == ("iceberg", SOURCE)
        return
    component = _component(bound, role)
    assert component in READERS, (kind, role, component)
    modules = READERS[component]
    read = set().union(*(_read_keys(module)[0] for module in modules))
    assert given <= read, f"{kind} {role}: bound but not read by {modules}: {sorted(given - read)}"
    required = {key for key in _read_keys(modules[0])[1] if owner_of(key) == NODE}
    assert required <= given, f"{kind} {role}: {modules[0]} requires {sorted(required - given)}"


def test_a_node_with_a_login_decides_both_halves_and_one_without_leaves_the_flows():
    jdbc = KINDS["jdbc"]
    assert jdbc.credentials(SOURCE, {"user": "sales"}) == {
        "source.conn.username": "sales",
        "source.conn.password": None,
    }
    assert jdbc.credentials(DESTINATION, {"url": "jdbc:postgresql://h/d?user=sales"}) == {
        "writer.jdbc.username": None,
        "writer.jdbc.password": None,
    }
    assert jdbc.credentials(SOURCE, {"url": "jdbc:postgresql://h/d"}) == {}
    assert KINDS["files"].credentials(SOURCE, {"user": "x"}) == {}
