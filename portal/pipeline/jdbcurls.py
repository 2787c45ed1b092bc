"""Where a JDBC URL leads, read as its driver reads it: the portal judges a node's URL with it
(`topology.reach`) and Test connection and discovery connect with it
(`pipeline.discovery.jdbc`)."""

from __future__ import annotations

import re
from urllib.parse import urlparse

from portal.pipeline import pgconn

_JDBC = re.compile(r"^jdbc:(?P<sub>[a-z0-9]+):(?P<rest>.*)\Z", re.I | re.S)
DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306}


def jdbc_target(url: str) -> tuple[str, list[tuple[str, int]], str | None] | None:
    """(subprotocol, [(host, port)], database) of a JDBC URL, or None when not parseable. A
    PostgreSQL URL is read as pgJDBC reads it (`pgconn.parse_url`: parameters over the path,
    host-less URLs, percent-escapes); its database is None when it names none (the user's name)."""
    match = _JDBC.match(url.strip())
    if not match:
        return None
    sub = match["sub"].lower()
    if sub == "sqlite":
        return sub, [], match["rest"]
    if sub == "postgresql":
        target = pgconn.parse_url(url)
        if target is None:
            return None
        return sub, list(target.hosts), target.database
    rest = match["rest"]
    if not rest.startswith("//"):
        return None
    hosts_part, _, tail = rest[2:].partition("/")
    database = re.split(r"[?;]", tail, maxsplit=1)[0]
    hosts = []
    for item in hosts_part.split(","):
        parsed = urlparse(f"//{item}")
        try:
            port = parsed.port or DEFAULT_PORTS.get(sub, 0)
        except ValueError:
            port = 0
        hosts.append((parsed.hostname or "localhost", port))
    return sub, hosts, database
