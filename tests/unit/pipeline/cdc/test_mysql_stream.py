"""The binlog reader keeps one connection for a whole read: thousands of changes come over the one
stream the read opened (the server counts every connection made to it), each once, and the read
ends by itself at the position the run planned, with later transactions left for the next run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from portal.pipeline.cdc import mysql as cdc_mysql
from tests.mariadb_binlog import binlog_mariadb, own_schema  # noqa: F401 (fixture)

ROWS = 3_000


@pytest.fixture
def ledger(binlog_mariadb: dict[str, Any]) -> Iterator[dict[str, Any]]:  # noqa: F811
    with own_schema(
        binlog_mariadb,
        "CREATE TABLE {db}.entries (id int PRIMARY KEY, memo varchar(80), amount decimal(12,2), at datetime)",
    ) as found:
        yield found


def connections(conn: Any) -> int:
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
        return int(cur.fetchone()[1])


def test_a_read_of_thousands_of_changes_uses_one_connection_and_stops_at_its_end(ledger):
    conn, db = ledger["conn"], ledger["name"]
    start = cdc_mysql.current(conn)
    with conn.cursor() as cur:
        values = ",".join(f"({i}, 'memo {i:056d}', {i}.25, '2024-01-02 03:04:05')" for i in range(ROWS))
        cur.execute(f"INSERT INTO `{db}`.entries VALUES {values}")  # noqa: S608
        cur.execute(f"UPDATE `{db}`.entries SET amount = amount + 1")  # noqa: S608
        cur.execute(f"DELETE FROM `{db}`.entries WHERE id < 1000")  # noqa: S608
    upto = cdc_mysql.current(conn)
    with conn.cursor() as cur:  # after the run was planned: the next run's
        cur.execute(f"INSERT INTO `{db}`.entries VALUES (-1, 'later', 0, NULL)")  # noqa: S608
    server = cdc_mysql.Server(ledger["server"]["host"], ledger["server"]["port"], db, "root", "")

    before = connections(conn)
    read = list(cdc_mysql.changes(server, "ledger", start, upto, [f"{db}.entries"]))
    # The stream's connection and the library's control connection, nothing more: no reconnect.
    assert connections(conn) - before == 2
    assert [c.op for c in read] == ["c"] * ROWS + ["u"] * ROWS + ["d"] * 1000
    assert sorted(int(c.values["id"]) for c in read if c.op == "c") == list(range(ROWS))  # type: ignore[arg-type]
    assert len({(c.position, c.index) for c in read}) == len(read)
    assert {c.values["amount"] for c in read if c.values["id"] == "7"} == {"7.25", "8.25"}

    # From where the read ended: only the later insert, and a read with nothing to do reads nothing.
    later = list(cdc_mysql.changes(server, "ledger", upto, cdc_mysql.current(conn), [f"{db}.entries"]))
    assert [(c.op, c.values["id"]) for c in later] == [("c", "-1")]
    assert list(cdc_mysql.changes(server, "ledger", upto, upto, [f"{db}.entries"])) == []
