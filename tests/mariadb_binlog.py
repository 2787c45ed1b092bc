"""A private MariaDB server writing a row-based binary log, for the change-data-capture stories.

The machine's own MariaDB runs with ``log_bin=OFF``; this starts one of its own from the machine's
binaries (``mariadb-install-db`` in a temporary folder, a free port, ``binlog_format=ROW`` and
``binlog_row_metadata=FULL``, run as the ``mysql`` system user) and stops it afterwards."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from tests.ports import free_port


@pytest.fixture(scope="session")
def binlog_mariadb() -> Iterator[dict[str, object]]:
    """``{"host", "port", "user"}`` of the private server (root, no password, over TCP)."""
    with private_server() as where:
        yield where


@contextlib.contextmanager
def private_server() -> Iterator[dict[str, object]]:
    """The server itself, for a script (tests/bench) as for the fixture."""
    folder = tempfile.mkdtemp(prefix="fp_mariadb_binlog_")
    if os.geteuid() == 0:
        user = pwd.getpwnam("mysql")
        os.chown(folder, user.pw_uid, user.pw_gid)
    data = os.path.join(folder, "data")
    subprocess.run(
        ["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=mysql",
         "--auth-root-authentication-method=normal", "--skip-test-db"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    port = free_port()
    server = subprocess.Popen(
        ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={folder}/sock", f"--port={port}",
         "--bind-address=127.0.0.1", "--user=mysql", f"--log-bin={data}/binlog", "--binlog-format=ROW",
         "--binlog-row-metadata=FULL", "--server-id=1", f"--pid-file={folder}/pid"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    where: dict[str, object] = {"host": "127.0.0.1", "port": port, "user": "root"}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                pymysql.connect(host="127.0.0.1", port=port, user="root", password="").close()
                break
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.3)
        yield where
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def own_schema(binlog_mariadb: dict[str, object], *statements: str) -> Iterator[dict[str, Any]]:
    """A database of its own on the private server, set up by ``statements`` (``{db}`` stands for
    its quoted name): ``{"name", "conn" (autocommit, root), "url" (JDBC), "server"}``. Dropped after."""
    name = f"shop_{uuid.uuid4().hex[:8]}"
    conn = pymysql.connect(**binlog_mariadb, password="", autocommit=True)  # type: ignore[arg-type]
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}`")
            for statement in statements:
                cur.execute(statement.format(db=f"`{name}`"))
        url = f"jdbc:mariadb://{binlog_mariadb['host']}:{binlog_mariadb['port']}/{name}"
        yield {"name": name, "conn": conn, "url": url, "server": binlog_mariadb}
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()
