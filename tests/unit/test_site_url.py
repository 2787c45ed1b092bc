"""Links in alerts point where the portal is served: `make run BIND=host:port`
hands the address to every process as FLOWPORT_BIND, and SITE_URL follows it
unless the operator sets SITE_URL."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from portal.settings import site_url_from_bind

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("bind", "site_url"),
    [
        ("127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("flowport.example.org:9000", "http://flowport.example.org:9000"),
        ("[::1]:8081", "http://[::1]:8081"),
        ("0.0.0.0:8080", f"http://{socket.gethostname()}:8080"),
        ("[::]:8080", f"http://{socket.gethostname()}:8080"),
        ("unix:/run/flowport.sock", "http://127.0.0.1:8000"),
    ],
)
def test_site_url_follows_the_bound_address(bind, site_url):
    assert site_url_from_bind(bind) == site_url


def _site_url(**env: str) -> str:
    """SITE_URL as a fresh process started by `make run` reads it."""
    environ = {k: v for k, v in os.environ.items() if k not in ("SITE_URL", "FLOWPORT_BIND")}
    environ.update(env, DJANGO_SETTINGS_MODULE="portal.settings")
    code = "from django.conf import settings; print(settings.SITE_URL)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_make_run_bind_moves_the_links_and_site_url_still_wins():
    assert _site_url(FLOWPORT_BIND="127.0.0.1:8123") == "http://127.0.0.1:8123"
    assert _site_url() == "http://127.0.0.1:8000"
    assert (
        _site_url(FLOWPORT_BIND="127.0.0.1:8123", SITE_URL="https://flowport.example.org")
        == "https://flowport.example.org"
    )
