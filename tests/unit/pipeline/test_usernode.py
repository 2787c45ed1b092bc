"""A user-made node's connection, judged where it lands, on a PostgreSQL server that asks every
login for its password: a plain role with its password into a database of its owner passes; a
role that can reach past its own grants (by attribute or by a predefined role), a database outside
the owner's patterns and a replication role outside an allowed capture are refused, each with the
same sentence. On this machine's server, which trusts 127.0.0.1, even the right password proves
nothing: refused."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from portal.pipeline import landing, usernode
from portal.pipeline.usernode import REFUSED, Bounds
from tests.pg_logical import private_server

PASSWORD = "a-role-password"
DATABASE = "secdb_owner_shop"
ROLES = {
    "secdb_plain": "",
    "secdb_reads_all": "GRANT pg_read_all_data TO secdb_reads_all",
    "secdb_monitor": "GRANT pg_monitor TO secdb_monitor",
    "secdb_creates_roles": "ALTER ROLE secdb_creates_roles CREATEROLE",
    "secdb_replicates": "ALTER ROLE secdb_replicates REPLICATION",
    "secdb_super": "ALTER ROLE secdb_super SUPERUSER",
    "secdb_member_of_wide": "CREATE ROLE secdb_wide_group; GRANT pg_read_server_files TO secdb_wide_group; "
    "GRANT secdb_wide_group TO secdb_member_of_wide",
}
MINE = Bounds(("secdb_owner_*",))


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A private server asking for passwords, with a role of each kind and the owner's database."""
    with private_server(password=True) as url, psycopg.connect(url, autocommit=True) as admin:
        for role, setup in ROLES.items():
            admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
            for statement in filter(None, setup.split("; ")):
                admin.execute(statement)
        admin.execute(f"CREATE DATABASE {DATABASE}")
        admin.execute("CREATE DATABASE secdb_someone_else")
        yield url.rsplit("@", 1)[1].split("/")[0]  # host:port


def judged(where: str, role: str, database: str = DATABASE, bounds: Bounds = MINE) -> landing.Landing:
    host, port = where.split(":")
    with psycopg.connect(host=host, port=port, dbname=database, user=role, password=PASSWORD) as conn:
        return landing.check(conn, f"data node '{role}'", portal=(), bounds=bounds)


def test_a_plain_role_with_its_password_into_its_owners_database_passes(server):
    assert judged(server, "secdb_plain").database == DATABASE


@pytest.mark.parametrize(
    "role",
    [
        "secdb_reads_all",
        "secdb_monitor",
        "secdb_creates_roles",
        "secdb_replicates",
        "secdb_super",
        "secdb_member_of_wide",
    ],
)
def test_a_role_reaching_past_its_grants_is_refused(server, role):
    with pytest.raises(landing.LandingRefused) as refused:
        judged(server, role)
    assert str(refused.value) == f"data node '{role}': {REFUSED}"


def test_a_database_outside_its_owners_patterns_is_refused_saying_the_same(server):
    with pytest.raises(landing.LandingRefused) as refused:
        judged(server, "secdb_plain", database="secdb_someone_else")
    assert str(refused.value) == f"data node 'secdb_plain': {REFUSED}"


@pytest.mark.parametrize("login", ["?user=postgres", "?applicationName=a&USER=postgres", ";password=x"])
def test_a_login_in_the_url_is_refused_before_spark_connects(spark, server, login):
    """Spark's driver takes the URL's user over the node's, which the probe logs in as: refused,
    though the node's own login would pass (a node saved before the URL check, say)."""
    options = {
        "url": f"jdbc:postgresql://{server}/{DATABASE}{login}",
        "driver": "org.postgresql.Driver",
        "user": "secdb_plain",
        "password": PASSWORD,
    }
    with pytest.raises(landing.LandingRefused) as refused:
        landing.check_jdbc(spark, options, "data node 'mine'", portal=(), bounds=MINE)
    assert str(refused.value) == f"data node 'mine': {REFUSED}"
    plain = {**options, "url": f"jdbc:postgresql://{server}/{DATABASE}"}
    assert landing.check_jdbc(spark, plain, "data node 'mine'", portal=(), bounds=MINE).database == DATABASE


def test_a_replication_role_passes_only_for_a_capture_the_administrators_allow(server):
    allowed = Bounds(MINE.databases, replication=True)
    assert judged(server, "secdb_replicates", bounds=allowed.for_capture()).database == DATABASE
    for bounds in (allowed, MINE.for_capture()):
        with pytest.raises(landing.LandingRefused):
            judged(server, "secdb_replicates", bounds=bounds)


def test_on_a_server_trusting_this_machine_even_the_right_password_proves_nothing():
    role = "secdb_trusted_plain"
    with psycopg.connect("host=127.0.0.1 user=postgres dbname=postgres", autocommit=True) as admin:
        admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
        try:
            with psycopg.connect(host="127.0.0.1", dbname="postgres", user=role, password=PASSWORD) as conn:
                assert conn.pgconn.used_password is False  # pg_hba.conf: trust
                with pytest.raises(landing.LandingRefused, match="refused: a user-made data node"):
                    landing.check(conn, "data node 'x'", portal=(), bounds=Bounds(("*",)))
        finally:
            admin.execute(f"DROP ROLE IF EXISTS {role}")


@pytest.mark.parametrize(
    ("name", "catalog"),
    [
        ("pg_catalog.pg_authid", True),
        ('"pg_catalog"."pg_authid"', True),
        ("pg_stat_activity", True),
        ("information_schema.tables", True),
        ("pg_toast.pg_toast_1", True),
        ("public.orders", False),
        ("orders", False),
        ("public.*", False),
    ],
)
def test_a_system_catalog_is_told_from_a_table_of_its_own(name, catalog):
    assert bool(usernode.catalog_names({"source.jdbc.tables": [name]})) is catalog
    found = landing.Landing(landing.POSTGRESQL, DATABASE, frozenset({"x"}))
    if catalog:
        with pytest.raises(landing.LandingRefused, match="is a system catalog"):
            landing.own_database(found, {"source.jdbc.tables": [name]}, "data node 'x'", MINE)
    else:
        landing.own_database(found, {"source.jdbc.tables": [name]}, "data node 'x'", MINE)
