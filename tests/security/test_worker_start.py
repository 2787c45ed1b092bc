"""A real Celery worker does not start while a data node can reach the master key."""

from __future__ import annotations

from pathlib import Path

import pytest

from portal.topology.models import DataNode
from tests.integration.stack import VENV_BIN, Proc, master_key_file, process_env, stack_broker_url, wait_until


@pytest.mark.django_db(transaction=True)
def test_a_worker_refuses_to_start_while_a_node_contains_the_master_key(tmp_path):
    key_dir = str(Path(master_key_file()).parent)
    # Written past the node checks (as an old row, or by hand): the worker is the last line.
    DataNode.objects.create(name="keys", kind="files", properties={"path": key_dir})
    broker = stack_broker_url(tmp_path / "broker", "TEST_REDIS_DB", 10)
    env = process_env(tmp_path / "var", broker)
    argv = [str(VENV_BIN / "celery"), "-A", "portal.celery", "worker", "--pool", "threads", "-Q", "sec.none"]
    argv += ["--without-mingle", "--without-gossip", "-n", "sec@%h"]
    worker = Proc("refusing-worker", argv, env, tmp_path / "logs")
    try:
        wait_until(lambda: not worker.alive(), 90, "the worker to exit")
        assert worker.popen.returncode != 0
        assert "refusing to start" in worker.log()
        assert "data node 'keys'" in worker.log() and "master key" in worker.log()
    finally:
        worker.stop()
