"""The attacker's world (tests.builders.world), made fresh for each story: two teams on one
portal, victor's flow team-v/orders with a secret under his customer key, mallory's mal/grab
over the same data nodes."""

from __future__ import annotations

import pytest

from portal.crypto import client
from portal.crypto.master import create_ring_file
from portal.flows.models import FlowConfig, FlowGroup
from portal.keys import services
from portal.topology import services as topology
from tests.builders.world import SECRET, World
from tests.factories import UserFactory
from tests.unit.topology.helpers import executor as make_executor


@pytest.fixture
def world(db, tmp_path, settings) -> World:
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"  # production's default
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
    settings.FLOWPORT_WORK_DIR = str(tmp_path / "work")
    secrets_dir = tmp_path / "portal-secrets"
    secrets_dir.mkdir()
    master_key = secrets_dir / "master-key"
    create_ring_file(master_key)
    settings.FLOWPORT_MASTER_KEY_FILE = str(master_key)
    settings.FLOWPORT_MASTER_KEY = ""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    (landing / "orders").mkdir(parents=True)
    (landing / "orders" / "part-1.csv").write_text("id,amount\n1,10\n")
    victim_out = lake / "team-v" / "orders" / "orders"
    victim_out.mkdir(parents=True)
    (victim_out / "part-0.csv").write_text("id,amount\n1,10\n")
    victor, mallory = UserFactory(username="victor"), UserFactory(username="mallory")
    grants = [{"role": role, "user": u} for u in ("victor", "mallory") for role in ("read", "write")]
    for name, path in (("landing", landing), ("lake", lake)):
        topology.create_data_node(
            {"name": name, "kind": "files", "properties": {"path": str(path)}, "acl": grants}
        )
    # The process has one SparkSession (orchestration.worker.sparkctx): the suite's master, as every other
    # in-process worker story uses, whichever of them starts it first.
    make_executor("x1", "landing>lake", spark_master=settings.SPARK_MASTER)

    victor_key = services.wrap_customer_key(
        user=victor, key=client.encode_key(client.generate_key()), label="db"
    ).customer_key
    FlowGroup.objects.create(name="team-v", owner_user=victor)
    FlowGroup.objects.create(name="mal", owner_user=mallory)
    victor_flow = FlowConfig.objects.create(
        flow_group="team-v",
        flow_name="orders",
        owner=victor,
        source="landing",
        destinations=["lake"],
        properties={
            "source.files.format": "csv",
            "source.conn.password": services.encrypt_value(victor_key.wrapped_key, SECRET),
            "encrypt.wrapped.key": victor_key.wrapped_key,
        },
    )
    mallory_flow = FlowConfig.objects.create(
        flow_group="mal",
        flow_name="grab",
        owner=mallory,
        source="landing",
        destinations=["lake"],
        properties={"source.files.format": "csv", "writer.output.format": "csv"},
    )
    return World(tmp_path, victor, mallory, landing, lake, master_key, victor_key, victor_flow, mallory_flow)
