"""A private PostgreSQL server with ``wal_level=logical`` for the change-data-capture stories.

The machine's own server keeps ``wal_level=replica``; logical decoding needs a server of its own, so
this starts one from the machine's binaries (initdb in a temporary folder, a free port, run as the
``postgres`` system user because PostgreSQL refuses to run as root) and stops it afterwards."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.ports import free_port


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(f"no PostgreSQL {name} under /usr/lib/postgresql/*/bin")
    return found[-1]


def _as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


# The superuser's password of a server that asks for passwords (``private_server(password=True)``).
SUPERUSER_PASSWORD = "private-superuser-password"


@contextlib.contextmanager
def private_server(*, password: bool = False) -> Iterator[str]:
    """Start the server; yields the ``postgres://`` URL of its ``postgres`` database (user ``postgres``).
    ``password``: every login must give its password (scram-sha-256), as on a server that does not
    trust this machine; the URL carries the superuser's."""
    folder = tempfile.mkdtemp(prefix="fp_pg_logical_")
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
    data = os.path.join(folder, "data")
    port = free_port()
    auth = ["-A", "trust"]
    if password:
        secret = os.path.join(folder, "superuser-password")
        with open(secret, "w") as handle:
            handle.write(SUPERUSER_PASSWORD)
        if os.geteuid() == 0:
            os.chown(secret, user.pw_uid, user.pw_gid)
        auth = ["-A", "scram-sha-256", f"--pwfile={secret}"]
    subprocess.run(
        _as_postgres([_bin("initdb"), "-D", data, *auth, "-U", "postgres", "--no-sync"]),
        check=True,
        capture_output=True,
    )
    options = (
        f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={folder} -c wal_level=logical "
        "-c max_replication_slots=20 -c max_wal_senders=10 -c fsync=off -c synchronous_commit=on"
    )
    log = os.path.join(folder, "server.log")
    subprocess.run(
        _as_postgres([_bin("pg_ctl"), "-D", data, "-o", options, "-l", log, "-w", "start"]),
        check=True,
        capture_output=True,
    )
    login = f"postgres:{SUPERUSER_PASSWORD}" if password else "postgres"
    url = f"postgres://{login}@127.0.0.1:{port}/postgres"
    try:
        with psycopg.connect(url) as conn:
            assert conn.execute("SHOW wal_level").fetchone() == ("logical",)
        yield url
    finally:
        subprocess.run(
            _as_postgres([_bin("pg_ctl"), "-D", data, "-m", "immediate", "stop"]), capture_output=True
        )
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def logical_pg() -> Iterator[str]:
    """The ``postgres://`` URL of the private server's ``postgres`` database (user ``postgres``)."""
    with private_server() as url:
        yield url


@contextlib.contextmanager
def own_database(logical_pg: str, *statements: str) -> Iterator[dict[str, Any]]:
    """A database of its own on the private server, set up by ``statements`` (autocommit):
    ``{"db": connection, "url": JDBC URL, "conninfo": postgres:// URL, "name": …}``. Dropped
    afterwards with the replication slots the story left in it (a slot keeps a database)."""
    name = f"shop_{uuid.uuid4().hex[:8]}"
    conninfo = f"{logical_pg.rsplit('/', 1)[0]}/{name}"
    with psycopg.connect(logical_pg, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(conninfo, autocommit=True) as db:
            for statement in statements:
                db.execute(statement)
            url = "jdbc:" + conninfo.replace("postgres://postgres@", "postgresql://")
            yield {"db": db, "url": url, "conninfo": conninfo, "name": name}
    finally:
        with psycopg.connect(logical_pg, autocommit=True) as admin:
            for (slot,) in admin.execute(
                "SELECT slot_name FROM pg_replication_slots WHERE database = %s", (name,)
            ).fetchall():
                admin.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
