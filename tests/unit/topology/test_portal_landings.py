"""The portal knows its own databases as their servers name them, and its URL check (the fast first
refusal at save) reads a URL as pgJDBC reads it."""

from __future__ import annotations

import psycopg
import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from portal.pipeline import landing
from portal.topology import reach
from portal.topology.models import DataNode

pytestmark = pytest.mark.django_db


def _own() -> tuple[str, int, str]:
    db = connection.settings_dict
    return str(db["HOST"] or "127.0.0.1"), int(db["PORT"] or 5432), str(db["NAME"])


@pytest.mark.postgres  # where a connection to the portal's PostgreSQL lands
def test_the_portals_databases_are_what_a_new_connection_to_them_lands_in():
    host, port, name = _own()
    with psycopg.connect(host=host, port=port, user=connection.settings_dict["USER"], dbname=name) as conn:
        landed = landing.identify(conn)
    own = reach.portal_landings()
    assert landed in own and any(landed.same_database(o) for o in own)
    with psycopg.connect(
        host=host, port=port, user=connection.settings_dict["USER"], dbname="postgres"
    ) as conn:
        beside = landing.identify(conn)
    assert not any(beside.same_database(o) for o in own)  # another database of the same server


@pytest.mark.postgres  # spellings of the portal's PostgreSQL database
@pytest.mark.parametrize(
    "spelling",
    [
        "jdbc:postgresql://0.0.0.0:{port}/{name}",
        "jdbc:postgresql://[::]:{port}/{name}",
        "jdbc:postgresql://[::ffff:127.0.0.1]:{port}/{name}",
        "jdbc:postgresql://{host}:{port}/{escaped}",
        "jdbc:postgresql://{host}:{port}/postgres?PGDBNAME={name}",
        "jdbc:postgresql://203.0.113.9:1/x?Host={host}&PORT={port}&dbname={name}",
        "jdbc:postgresql://{host}:{port}/",
    ],
)
def test_the_url_check_reads_a_url_as_pgjdbc_does(spelling):
    host, port, name = _own()
    url = spelling.format(host=host, port=port, name=name, escaped=name.replace("_", "%5f"))
    node = DataNode(name="sneaky", kind="jdbc", properties={"url": url})
    with pytest.raises(ValidationError, match="portal's own database"):
        node.clean()


def test_a_mariadb_node_must_name_its_database_but_does_not_stop_a_worker():
    node = DataNode(name="server", kind="jdbc", properties={"url": "jdbc:mariadb://db:3306/"})
    with pytest.raises(ValidationError, match="names no database"):
        node.clean()
    DataNode(name="shop", kind="jdbc", properties={"url": "jdbc:mariadb://db:3306/shop"}).clean()
    assert reach.portal_secrets_problems([node]) == []  # the job is refused, the worker still starts
