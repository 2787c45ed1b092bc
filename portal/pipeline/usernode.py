"""A user-made data node's connection: its owner's own credentials and nothing more.

The portal connects from the worker's address, which database servers often trust (``trust``,
``peer`` or ``ident`` lines in ``pg_hba.conf``, a MariaDB ``root`` without a password). A node a
user makes would otherwise lend them that trust: ``postgres`` without a password reads every
database and ``pg_authid``. So a user-made node's connection is judged where it lands, right after
it opens and before the job's or the test's first question (:func:`judge`, called by
:func:`portal.pipeline.landing.check` and :func:`~portal.pipeline.landing.check_jdbc`):

* it authenticated with the password the user gave: PostgreSQL says whether it asked for one
  (libpq's ``PQconnectionUsedPassword``; a Spark JDBC connection is proved by a psycopg or PyMySQL
  connection with the same URL and credentials landing in the same database, :func:`probe`);
  MariaDB/MySQL has no trust by address, so the account it landed as must have a password;
* the role can do nothing beyond its own grants: PostgreSQL ``rolsuper``, ``rolcreaterole``,
  ``rolbypassrls``, ``rolreplication`` (unless a change-data-capture source the administrators
  allow, :attr:`Bounds.replication`) and the predefined roles that read or write beyond them
  (``pg_read_all_data``, ``pg_read_server_files``, ``pg_monitor``, …) are refused for the login role
  and every role it is a member of; MariaDB: any privilege on ``*.*`` beyond ``USAGE`` (the
  replication ones for an allowed capture) and any granted role (whose privileges the account
  may not read);
* the database it landed in (``current_database()``, ``DATABASE()``) matches the administrators'
  patterns for the node's owners (:attr:`Bounds.databases`) and is not a system database.

Every refusal says the same (:data:`REFUSED`): which rule failed, or whether the database is the
portal's own, is not told to someone probing for names. System catalogs are not read through a
user-made node either: a table name in ``pg_catalog``, ``information_schema`` or ``pg_toast``, or
an unqualified ``pg_*`` name (PostgreSQL searches ``pg_catalog`` first), is refused
(:func:`catalog_names`). No Django here: the worker puts each hop node's bounds in the JobSpec
(:data:`SPEC_KEY`) and Test connection passes them in.

An administrator's database node without an account of its own lends the same trust to whatever
login a flow (or Test connection) gives, so that login is judged the same way (:data:`FLOW_LOGIN`):
its own password, no server-wide privilege, no system catalog — in whatever database the
administrator named, and said plainly (:data:`FLOW_LOGIN_REFUSED`, nothing to hide there).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from portal.pipeline.jobspec import url_has_login
from portal.pipeline.landing import MYSQL, POSTGRESQL, SQLITE, Landing, LandingRefused, check

SPEC_KEY = "user_nodes"  # the JobSpec field (kept in JobSpec.extra): {role: Bounds.to_dict()}
REFUSED = (
    "refused: a user-made data node connects only with its owner's own password, as a role without "
    "server-wide privileges, into a database the administrators allow its owners (USER_NODE_DATABASES)"
)
# An administrator's database node without an account of its own connects with the login each
# flow gives: that login is judged as a user-made node's is (its own password, no server-wide
# privilege) — else a flow naming `postgres` on a server that trusts the workers is its superuser.
# The database is the administrator's choice (any name), and capture may use a replication role.
FLOW_LOGIN_REFUSED = (
    "refused: a login a flow gives to a data node without an account of its own connects only with "
    "its own password, as a role without server-wide privileges"
)
SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast")
SYSTEM_DATABASES = ("mysql", "information_schema", "performance_schema", "sys")
# PostgreSQL's predefined roles that reach past a role's own grants (PostgreSQL 15).
PG_WIDE_ROLES = (
    "pg_read_all_data",
    "pg_write_all_data",
    "pg_read_server_files",
    "pg_write_server_files",
    "pg_execute_server_program",
    "pg_monitor",
    "pg_read_all_stats",
    "pg_read_all_settings",
    "pg_stat_scan_tables",
    "pg_signal_backend",
    "pg_checkpoint",
    "pg_create_subscription",
    "pg_use_reserved_connections",
)
# MariaDB/MySQL global privileges a change-data-capture source needs to read the binary log.
MY_REPLICATION = ("REPLICATION SLAVE", "REPLICATION CLIENT", "BINLOG MONITOR", "REPLICATION SLAVE ADMIN")

Rows = Callable[[str], list[tuple[Any, ...]]]


@dataclass(frozen=True)
class Bounds:
    """What a user-made node's connection may be: the database name patterns of its owners
    (already filled in), whether the administrators let such a node capture changes with a
    replication role, and whether this connection is such a capture."""

    databases: tuple[str, ...]
    replication: bool = False
    capturing: bool = False
    flow_login: bool = False  # an administrator's node without an account: the flow's login judged

    @property
    def hides_reasons(self) -> bool:
        """A user-made node's refusals all say :data:`REFUSED`; a flow login's database is the
        administrator's choice, nothing to hide."""
        return not self.flow_login

    def allows_database(self, name: str) -> bool:
        return bool(name) and any(fnmatch.fnmatchcase(name, pattern) for pattern in self.databases)

    def for_capture(self) -> Bounds:
        """The bounds of a change-data-capture connection (a replication role, if allowed)."""
        return replace(self, capturing=True)

    def to_dict(self) -> dict[str, Any]:
        found = {"databases": list(self.databases), "replication": self.replication}
        return {**found, "flow_login": True} if self.flow_login else found

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Bounds:
        return cls(
            tuple(str(p) for p in data.get("databases") or ()),
            bool(data.get("replication")),
            flow_login=bool(data.get("flow_login")),
        )

    # What :mod:`portal.pipeline.landing` asks of a user-made node's connection (its ``Bounds``).

    def refusal(self, what: str) -> LandingRefused:
        return LandingRefused(f"{what}: {FLOW_LOGIN_REFUSED}") if self.flow_login else refusal(what)

    def judge_dbapi(self, connection: Any, found: Landing, what: str) -> None:
        judge_dbapi(connection, found, self, what)

    def probe(self, options: Mapping[str, str], what: str, portal: Iterable[Landing]) -> Landing:
        return probe(options, what, portal, self)

    def catalog_problems(self, names: Mapping[str, Sequence[str]]) -> list[str]:
        return [catalog_problem(key, name) for key, name in catalog_names(names)]


FLOW_LOGIN = Bounds(("*",), replication=True, flow_login=True)


def from_spec(extra: Mapping[str, Any] | None, role: str) -> Bounds | None:
    """The bounds of the hop's node in ``role`` ("source", "destination"): None for an
    administrator's node with an account of its own."""
    found = ((extra or {}).get(SPEC_KEY) or {}).get(role)
    return Bounds.from_dict(found) if isinstance(found, Mapping) else None


def spec_entry(extra: Mapping[str, Any] | None, role: str) -> dict[str, Any] | None:
    """The bounds of the hop's node in ``role`` as a commit step keeps them (None: none)."""
    bounds = from_spec(extra, role)
    return bounds.to_dict() if bounds is not None else None


def from_step(data: Mapping[str, Any]) -> Bounds | None:
    """The bounds a commit step kept (:func:`spec_entry`)."""
    found = data.get("user_node")
    return Bounds.from_dict(found) if isinstance(found, Mapping) else None


def refusal(what: str) -> LandingRefused:
    return LandingRefused(f"{what}: {REFUSED}")


# --- the judgement ---------------------------------------------------------------------------


def _pg_wide(rows: Rows, bounds: Bounds) -> bool:
    """Does the login role, or a role it is a member of, reach past its own grants?"""
    replication = "false" if bounds.capturing and bounds.replication else "r.rolreplication"
    wide = ", ".join(f"'{name}'" for name in PG_WIDE_ROLES)
    found = rows(
        "SELECT count(*) FROM pg_catalog.pg_roles r "  # noqa: S608 - constants only
        "WHERE (pg_catalog.pg_has_role(session_user, r.oid, 'MEMBER') "
        "OR pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')) "
        f"AND (r.rolsuper OR r.rolcreaterole OR r.rolbypassrls OR {replication} OR r.rolname IN ({wide}))"
    )
    return int(found[0][0]) != 0


_IDENTIFIED = re.compile(
    r"IDENTIFIED (BY PASSWORD|VIA (mysql_native_password|ed25519|parsec) USING) '[^']+'", re.I
)
_GLOBAL = re.compile(r"^GRANT (?P<privileges>.+?) ON \*\.\* TO ", re.I)


def _my_account_ok(rows: Rows, bounds: Bounds) -> bool:
    """Has the account it landed as a password, no granted role and no global privilege?"""
    lines = [str(row[0]) for row in rows("SHOW GRANTS FOR CURRENT_USER()")]
    allowed = {"USAGE"} | (set(MY_REPLICATION) if bounds.capturing and bounds.replication else set())
    has_password = False
    for line in lines:
        wide = _GLOBAL.match(line)
        if wide is None:
            if re.match(r"^GRANT `", line):  # a role: its privileges are not ours to read
                return False
            continue
        has_password = has_password or bool(_IDENTIFIED.search(line))
        privileges = {p.strip().upper() for p in wide["privileges"].split(",")}
        if not privileges <= allowed or "WITH GRANT OPTION" in line.upper():
            return False
    return has_password


def judge(rows: Rows, found: Landing, bounds: Bounds, what: str, *, used_password: bool | None) -> None:
    """Refuse (LandingRefused, always :data:`REFUSED`) a connection of a user-made node that
    did not log in with its owner's password, may reach past its own grants, or landed in a
    database its owners may not use. ``used_password``: what PostgreSQL's client library says
    (None where it cannot, and for MariaDB/MySQL, which are asked about the account)."""
    try:
        if found.engine == POSTGRESQL:
            ok = (
                used_password is True
                and bounds.allows_database(found.database)
                and not _pg_wide(rows, bounds)
            )
        elif found.engine == MYSQL:
            ok = (
                found.database.lower() not in SYSTEM_DATABASES
                and bounds.allows_database(found.database)
                and _my_account_ok(rows, bounds)
            )
        else:  # SQLite: an Iceberg catalog file, in its owner's own area (policy); no server to borrow
            ok = found.engine == SQLITE
    except LandingRefused:
        raise
    except Exception:  # a question the server would not answer: fail closed, saying the same
        ok = False
    if not ok:
        raise bounds.refusal(what)


def dbapi_rows(connection: Any) -> Rows:
    def rows(sql: str) -> list[tuple[Any, ...]]:
        cursor = connection.cursor()
        try:
            cursor.execute(sql)
            return [tuple(row) for row in cursor.fetchall()]
        finally:
            cursor.close()

    return rows


def used_password(connection: Any) -> bool | None:
    """Did a psycopg connection authenticate with a password (None: not a psycopg connection)."""
    pgconn = getattr(connection, "pgconn", None)
    return bool(pgconn.used_password) if pgconn is not None else None


def judge_dbapi(connection: Any, found: Landing, bounds: Bounds, what: str) -> None:
    judge(dbapi_rows(connection), found, bounds, what, used_password=used_password(connection))


# --- a Spark JDBC connection, proved by one of ours ---------------------------------------------

_MY_URL = re.compile(
    r"^jdbc:(?:mysql|mariadb)://(?P<host>[^/:?]+|\[[^\]]+\])(?::(?P<port>\d+))?/(?P<db>[^?;]*)", re.I
)


def probe(options: Mapping[str, str], what: str, portal: Iterable[Landing], bounds: Bounds) -> Landing:
    """Open a psycopg or PyMySQL connection with the JDBC options' URL, user and password, judge it
    as the node's (:func:`judge`) and close it: the landing a Spark connection with the same
    options must share (Spark's JDBC driver cannot say whether the server asked for the
    password)."""
    from portal.pipeline import pgconn  # psycopg: only where a PostgreSQL node is probed

    url = options.get("url", "")
    if url_has_login(url):  # the driver would log in as the URL's user, the probe as the node's
        raise bounds.refusal(what)
    user, password = options.get("user") or None, options.get("password") or None
    if url.startswith("jdbc:postgresql:"):
        try:
            conn: Any = pgconn.connect(
                url, user, password, what=what, autocommit=True, portal=portal, timeout=15
            )
        except LandingRefused:
            if not bounds.hides_reasons:  # a flow's login: the portal's database said as such
                raise
            raise bounds.refusal(what) from None
        except Exception as error:
            raise LandingRefused(f"{what}: cannot connect: {_short(error)}") from None
    else:
        match = _MY_URL.match(url)
        if match is None:
            raise bounds.refusal(what)
        import pymysql  # the MariaDB driver: only where a MariaDB node is probed

        try:
            conn = pymysql.connect(
                host=match["host"].strip("[]"),
                port=int(match["port"] or 3306),
                database=match["db"] or None,
                user=user or "",
                password=password or "",
                connect_timeout=15,
                autocommit=True,
            )
        except Exception as error:
            raise LandingRefused(f"{what}: cannot connect: {_short(error)}") from None
    try:
        found = check(conn, what, portal=portal, bounds=bounds)
    finally:
        conn.close()
    return found


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


# --- table names -----------------------------------------------------------------------------


def catalog_names(names: Mapping[str, Sequence[str]]) -> list[tuple[str, str]]:
    """(key, name) of the table names or patterns that name a PostgreSQL system catalog: a system
    schema's, or an unqualified ``pg_*`` one (``pg_catalog`` comes first in every search path)."""
    found = []
    for key, values in names.items():
        for name in values:
            parts = [part.strip().strip('"').lower() for part in name.strip().split(".")]
            schema = parts[-2] if len(parts) >= 2 else ""
            if (schema and (schema in SYSTEM_SCHEMAS or schema.startswith("pg_"))) or (
                not schema and parts[-1].startswith("pg_")
            ):
                found.append((key, name))
    return found


def catalog_problem(key: str, name: str) -> str:
    return (
        f"{key}: '{name}' is a system catalog; a user-made data node, or a flow's own login, reads only "
        "its database's own tables"
    )
