"""The orchestration tests' shared world: jobs run in-process through a RecordingPipeline."""

from __future__ import annotations

import pytest

from portal.orchestration.state import commitstore
from portal.orchestration.worker import executor
from tests.integration.crash_harness import RecordingPipeline, World


@pytest.fixture
def world(tmp_path, monkeypatch, settings):
    """A World whose jobs run in-process through a RecordingPipeline, with no failpoint armed."""
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
    settings.FLOWPORT_WORK_DIR = str(tmp_path / "work")
    pipeline = RecordingPipeline()
    monkeypatch.setattr(executor, "run_job", pipeline)
    commitstore.reset_failpoints()
    yield World(tmp_path, pipeline)
    commitstore.reset_failpoints()
