"""Ports for the servers the tests start (slapd, redis-server, Spark, the
portal itself).

A port from ``bind(("127.0.0.1", 0))`` lies in the kernel's ephemeral range,
so between the check and the server's own bind any outgoing connection may
take it as its source port — and while a server is down, a client retrying
``connect()`` to it can even connect to itself. Ports are therefore drawn from
below the ephemeral range, and never handed out twice in one test run."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

_LOWEST = 20000
_handed_out: set[int] = set()


def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    highest = _ephemeral_floor() - 1
    if highest < _LOWEST + 1000:  # an unusual kernel setting: take what there is
        highest = 65535
    for _ in range(200):
        port = random.randint(_LOWEST, highest)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port between {_LOWEST} and {highest}")


def own_redis_url(db_variable: str, default_db: int) -> str:
    """The URL of a Redis database the tests own: ``TEST_REDIS_SERVER`` (host:port,
    default this machine's 127.0.0.1:6379) and the database number from
    ``db_variable``, so a concurrent suite in another checkout can use a server or
    database of its own."""
    server = os.environ.get("TEST_REDIS_SERVER", "127.0.0.1:6379")
    return f"redis://{server}/{int(os.environ.get(db_variable, default_db))}"
