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
from collections.abc import Iterator

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


@contextlib.contextmanager
def private_server() -> Iterator[str]:
    """Start the server; yields the ``postgres://`` URL of its ``postgres`` database (user ``postgres``)."""
    folder = tempfile.mkdtemp(prefix="fp_pg_logical_")
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
    data = os.path.join(folder, "data")
    port = free_port()
    subprocess.run(
        _as_postgres([_bin("initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]),
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
    url = f"postgres://postgres@127.0.0.1:{port}/postgres"
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
