"""The spellings of the portal's own database an attacker tries, and a world with the text
check blinded, so only where a connection lands decides: what the attacker stories share."""

from __future__ import annotations

import pytest
from django.db import connection

from portal.topology import reach
from tests.builders.world import World

LANDED = "the connection landed in the portal's own database"


def spellings() -> dict[str, str]:
    host, port, name = portal_db()
    escaped = "".join(f"%{ord(c):02X}" for c in name)
    hostless_port = "" if port == 5432 else f"?PGPORT={port}"
    return {
        "the any-address 0.0.0.0": f"jdbc:postgresql://0.0.0.0:{port}/{name}",
        "an IPv4-mapped IPv6 address": f"jdbc:postgresql://[::ffff:127.0.0.1]:{port}/{name}",
        "a percent-escaped name": f"jdbc:postgresql://{host}:{port}/{escaped}",
        "a PGDBNAME parameter": f"jdbc:postgresql://{host}:{port}/postgres?PGDBNAME={name}",
        "host= and dbname= parameters": f"jdbc:postgresql://203.0.113.9:1/x?host={host}&port={port}&dbname={name}",
        "no host at all": f"jdbc:postgresql:{name}{hostless_port}",
    }


@pytest.fixture
def blind_text_check(monkeypatch) -> None:
    """A spelling no text check knows yet: the URL's text lets everything through."""
    monkeypatch.setattr(reach, "jdbc_url_problem", lambda url: None)


def run_the_world(world: World):
    execution, spec = world.bound_spec()
    return world.run_on_worker(spec, execution)


def portal_db() -> tuple[str, int, str]:
    db = connection.settings_dict
    return str(db["HOST"] or "127.0.0.1"), int(db["PORT"] or 5432), str(db["NAME"])
