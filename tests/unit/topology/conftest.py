"""A master key of the test's own, for the stories where typed credentials are encrypted
(user-made data nodes, the node form's password boxes), and a data folder of the test's own
(the users' areas are made under it)."""

from __future__ import annotations

import pytest

from portal.crypto.master import create_ring_file


@pytest.fixture
def master_key(settings, tmp_path):
    path = tmp_path / "keys" / "master-key"
    path.parent.mkdir()
    create_ring_file(path)
    settings.FLOWPORT_MASTER_KEY_FILE = str(path)
    settings.FLOWPORT_MASTER_KEY = ""
    return path


@pytest.fixture
def data_dir(settings, tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    settings.FLOWPORT_DATA_DIR = folder
    return folder
