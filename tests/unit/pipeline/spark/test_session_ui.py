"""Where a driver's web UI would listen (portal.pipeline.spark.session): where the portal listens.
The real driver's sockets are measured in tests/security/test_attacker_surfaces.py."""

from __future__ import annotations

import os

import pytest

from portal.pipeline.spark import session


@pytest.mark.parametrize(
    ("bind", "host"),
    [
        ("127.0.0.1:8000", "127.0.0.1"),
        ("0.0.0.0:8080", "0.0.0.0"),  # noqa: S104 - a portal bound everywhere: the UI follows it
        ("[::1]:8000", "::1"),
        ("flowport.internal:8000", "flowport.internal"),
        ("unix:/run/flowport.sock", "127.0.0.1"),
        (":8000", "127.0.0.1"),
        ("", "127.0.0.1"),
    ],
)
def test_the_ui_listens_on_the_host_gunicorn_binds(monkeypatch, bind: str, host: str):
    monkeypatch.delenv("SPARK_UI_HOST", raising=False)
    monkeypatch.setenv("FLOWPORT_BIND", bind)
    assert session.ui_host() == host


def test_an_operator_may_name_the_uis_host(monkeypatch):
    monkeypatch.setenv("FLOWPORT_BIND", "0.0.0.0:8080")
    monkeypatch.setenv("SPARK_UI_HOST", "10.0.0.5")
    assert session.ui_host() == "10.0.0.5"


@pytest.mark.parametrize(("value", "enabled"), [("", False), ("false", False), ("true", True), ("1", True)])
def test_the_ui_is_off_unless_an_operator_turns_it_on(monkeypatch, value: str, enabled: bool):
    monkeypatch.setenv("SPARK_UI_ENABLED", value)
    assert session.ui_enabled() is enabled


def test_the_jvms_address_stays_out_of_what_the_worker_starts_later(monkeypatch):
    """spark-submit for a cluster job, started by the same worker, must not inherit it."""
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.setenv("SPARK_UI_HOST", "before")
    with session._jvm_environment({"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_UI_HOST": "during"}):
        assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
        assert os.environ["SPARK_UI_HOST"] == "during"
    assert "SPARK_LOCAL_IP" not in os.environ
    assert os.environ["SPARK_UI_HOST"] == "before"
