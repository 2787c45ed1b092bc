"""The column rules' key on the worker: the JobSpec a worker (or a cluster driver) runs carries the
flow owner's customer key unwrapped in memory only when the rules need it, never in what is
serialized or shown."""

from __future__ import annotations

import threading

import pytest

from portal.crypto import client, wrapping
from portal.crypto.master import create_ring_file
from portal.orchestration.state import joblogs
from portal.orchestration.worker.executor import JobRun
from portal.pipeline.__main__ import _decrypted

pytestmark = pytest.mark.django_db  # the worker reads the quotas that apply to the run


def _message(wrapped: str, **properties: str) -> dict:
    return {"job_name": "j", "execution_id": 9, "properties": {"encrypt.wrapped.key": wrapped, **properties}}


def test_the_worker_unwraps_the_owners_key_only_for_rules_that_need_it(settings, tmp_path):
    ring, _ = create_ring_file(tmp_path / "master-key")
    settings.FLOWPORT_MASTER_KEY_FILE, settings.FLOWPORT_MASTER_KEY = str(tmp_path / "master-key"), ""
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
    key = client.generate_key()
    wrapped = wrapping.wrap(ring, key)
    run = JobRun(None, 1, "w", joblogs.JobLog(9, "j", 1), threading.Event(), None, None)  # type: ignore[arg-type]

    spec = run.read_spec(_message(wrapped, **{"columns.encrypt": "ssn"}))

    assert spec.column_key == key
    assert "column_key" not in spec.to_dict() and key.hex() not in repr(spec)
    assert run.read_spec(_message(wrapped, **{"columns.drop": "note"})).column_key is None
    salted = {"columns.hash": "email", "columns.hash.secret": client.encrypt(key, "pepper")}
    assert run.read_spec(_message(wrapped, **salted)).column_key is None  # its own salt: no key needed
    assert run.read_spec(_message(wrapped, **{"columns.hash": "email"})).column_key == key

    # A cluster driver does the same with the ring file it is given.
    driver = _decrypted(_message(wrapped, **{"columns.encrypt": "ssn"}), str(tmp_path / "master-key"))
    assert driver.column_key == key
