"""A refusal is one line in the web process's log; an error keeps its traceback."""

from __future__ import annotations

import logging

import pytest

from portal.topology import services
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_a_refused_request_is_logged_in_one_line_without_a_traceback(client, settings, caplog, tmp_path):
    settings.DATA_NODE_DEFAULT_ACCESS = "closed"
    services.create_data_node({"name": "landing", "kind": "files", "properties": {"path": str(tmp_path)}})
    client.force_login(UserFactory(username="stranger"))
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert client.post("/topology/datanodes/landing/test/").status_code == 403
    (record,) = [record for record in caplog.records if record.name == "django.request"]
    assert record.getMessage().startswith("Forbidden (Permission denied)")
    assert record.exc_info is None and "Traceback" not in caplog.text


def test_a_server_error_keeps_its_traceback(caplog):
    logger = logging.getLogger("django.request")
    with caplog.at_level(logging.ERROR, logger="django.request"):
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            logger.error("Internal Server Error: /", exc_info=True)
    assert "Traceback" in caplog.text and "RuntimeError: boom" in caplog.text
