"""The topology file: loaded at start-up, idempotent, errors as file:line: reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from portal.flows.compiler import compile_flow
from portal.topology.models import DataNode, SpecExecutor
from portal.topology.services import load_topology_file
from portal.topology.topologyfile import TopologyFileError
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db
DEMO = Path(__file__).resolve().parents[3] / "portal" / "topology" / "demo_topology.yaml"


def test_demo_topology_compiles_landing_to_archive_in_two_hops_on_two_executors():
    assert load_topology_file(DEMO) == {"created": 5, "updated": 0, "unchanged": 0, "removed": 0}
    flow = FlowConfigFactory.build(
        flow_group="demo", flow_name="f", source="landing", destinations=["archive"]
    )
    compiled = compile_flow(flow)
    assert [(j.job_name, j.executor, j.queue) for j in compiled.jobs] == [
        ("demo.f.1-landing-to-lake", "spark-local-ingest", "executor.spark-local-ingest"),
        ("demo.f.2-lake-to-archive", "spark-local-replicate", "executor.spark-local-replicate"),
    ]


def test_sync_is_idempotent_and_follows_the_file(tmp_path):
    assert load_topology_file(DEMO)["created"] == 5  # three nodes, two executors
    assert load_topology_file(DEMO) == {"created": 0, "updated": 0, "unchanged": 5, "removed": 0}
    smaller = tmp_path / "t.yaml"
    text = DEMO.read_text()
    smaller.write_text(
        text.replace("cost: 10\n    description: Ingests", "cost: 5\n    description: Ingests")
    )
    # Same entries from another file: updated in place, not duplicated.
    assert load_topology_file(smaller)["updated"] == 1
    assert SpecExecutor.objects.get(name="spark-local-ingest").cost == 5


def test_executor_removed_from_its_file_is_removed(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(
        "dataNodes: [{name: a}, {name: b}]\n"
        "executors:\n  - {name: x, capabilities: ['a -> b']}\n  - {name: y, capabilities: [[b, a]]}\n"
    )
    assert load_topology_file(path)["created"] == 4
    path.write_text(
        "dataNodes: [{name: a}, {name: b}]\nexecutors:\n  - {name: x, capabilities: ['a -> b']}\n"
    )
    assert load_topology_file(path) == {"created": 0, "updated": 0, "unchanged": 3, "removed": 1}
    assert list(SpecExecutor.objects.values_list("name", flat=True)) == ["x"]


def test_yaml_errors_name_file_line_and_reason(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "dataNodes:\n"
        "  - name: a\n"
        "  - name: bad name\n"
        "executors:\n"
        "  - name: x\n"
        "    sparkMaster: spark://nohost\n"
        "    capabilities:\n"
        "      - a -> ghost\n"
        "  - name: x\n"
    )
    with pytest.raises(TopologyFileError) as error:
        load_topology_file(path)
    lines = str(error.value).splitlines()
    assert f"{path}:3: dataNodes 'bad name': name: Use 1-128 letters, digits, '_', '.' or '-'." in lines
    assert any(
        line.startswith(f"{path}:5: executors 'x': sparkMaster: 'spark://nohost' is not") for line in lines
    )
    assert f"{path}:9: executors 'x': the name is used twice" in lines
    assert f"{path}:8: executor 'x': capability a -> ghost: unknown destination data node 'ghost'" in lines
    assert not DataNode.objects.exists()


def test_syntax_errors_name_the_line(tmp_path):
    yaml_file = tmp_path / "t.yml"
    yaml_file.write_text("dataNodes: [\n  {name: a}\n")
    with pytest.raises(TopologyFileError) as error:
        load_topology_file(yaml_file)
    assert str(error.value).startswith(f"{yaml_file}:3: not valid YAML")
    hocon_file = tmp_path / "t.conf"
    hocon_file.write_text("dataNodes = [\n  {name = a}\n")
    with pytest.raises(TopologyFileError) as error:
        load_topology_file(hocon_file)
    assert str(error.value).startswith(f"{hocon_file}:3: not valid HOCON")


def test_hocon_topology_loads_and_its_errors_name_lines(tmp_path):
    good = tmp_path / "t.conf"
    good.write_text(
        "dataNodes = [\n  { name = a, kind = files }\n  { name = b }\n]\n"
        'executors = [\n  { name = x, technology = yarn, sparkMaster = yarn, capabilities = ["a -> b"] }\n]\n'
    )
    assert load_topology_file(good)["created"] == 3
    assert SpecExecutor.objects.get(name="x").spark_master == "yarn"
    bad = tmp_path / "bad.conf"
    bad.write_text("dataNodes = [\n  { name = c, kind = nope }\n]\n")
    with pytest.raises(TopologyFileError) as error:
        load_topology_file(bad)
    assert str(error.value) == f"{bad}:2: dataNodes 'c': kind: Value 'nope' is not a valid choice."


def test_management_command_reports_errors_and_summary(tmp_path, capsys, settings):
    bad = tmp_path / "bad.yaml"
    bad.write_text("executors:\n  - name: x\n    colour: red\n")
    with pytest.raises(CommandError) as error:
        call_command("load_topology", str(bad))
    assert f"{bad}:2: executors 'x': unknown key(s) colour" in str(error.value)
    settings.TOPOLOGY_FILE = str(DEMO)
    call_command("load_topology")
    assert "5 created, 0 updated, 0 unchanged, 0 removed" in capsys.readouterr().out


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(TopologyFileError) as error:
        load_topology_file(tmp_path / "nope.yaml")
    assert str(error.value) == f"{tmp_path / 'nope.yaml'}:?: cannot read the file: No such file or directory"
