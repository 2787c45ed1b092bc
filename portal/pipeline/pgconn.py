"""Open a psycopg connection from a ``jdbc:postgresql:`` URL, read as pgJDBC reads it.

The JDBC writer's publish step must run one destination transaction (move staging rows, write the
publish marker); Spark's JDBC writer cannot do that, so the commit step talks to PostgreSQL directly.
The URL is read the way pgJDBC reads it (:func:`parse_url`), so the step lands where the writer's
staging tables are; and wherever it lands is judged before its first statement
(:func:`portal.pipeline.landing.check`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import unquote_plus

import psycopg
from psycopg import sql

from portal.pipeline import landing
from portal.pipeline.errors import ConfigError

PREFIX = "jdbc:postgresql:"
DEFAULT_PORT = 5432
# URL parameters pgJDBC takes under their service-file names too (any case): host=, port=, dbname=.
_SERVICE_NAMES = {"HOST": "PGHOST", "PORT": "PGPORT", "DBNAME": "PGDBNAME"}


@dataclass(frozen=True)
class PgTarget:
    """Where a ``jdbc:postgresql:`` URL points: hosts with ports, the database (None: the user's
    name, pgJDBC's and libpq's default), the service named (``?service=``) and the other parameters."""

    hosts: tuple[tuple[str, int], ...]
    database: str | None
    service: str | None = None
    params: dict[str, str] = field(default_factory=dict)

    @property
    def user(self) -> str | None:
        return self.params.get("user") or None

    @property
    def password(self) -> str | None:
        return self.params.get("password") or None


def parse_url(url: str) -> PgTarget | None:  # noqa: C901
    """A ``jdbc:postgresql:`` URL as pgJDBC's ``Driver.parseURL`` reads it (None where pgJDBC would
    not take it): ``//host[:port][,host[:port]...]/[database]`` or a host-less ``database``, the
    database percent-decoded, and URL parameters over both — ``PGHOST``, ``PGPORT``, ``PGDBNAME`` and
    their service-file names ``host``, ``port``, ``dbname``. A ``service`` file is not followed here."""
    server, _, args = url.strip().partition("?")
    if not server.startswith(PREFIX):
        return None
    rest = server[len(PREFIX) :]
    props: dict[str, str] = {}
    if rest in ("//", "///"):
        rest = ""
    elif rest.startswith("//"):
        rest = rest[2:]
        if rest.count("/") != 1:
            return None
        head, _, path = rest.partition("/")
        if path:
            props["PGDBNAME"] = unquote_plus(path)
        hosts, ports = [], []
        for address in head.split(","):
            colon = address.rfind(":")
            if colon != -1 and address.rfind("]") < colon:
                hosts.append(address[:colon] or "localhost")
                ports.append(address[colon + 1 :])
            else:
                hosts.append(address)
                ports.append(str(DEFAULT_PORT))
        props["PGHOST"], props["PGPORT"] = ",".join(hosts), ",".join(ports)
    elif rest.startswith("/"):
        return None
    elif rest:
        props["PGDBNAME"] = unquote_plus(rest)
    service = None
    for token in args.split("&"):
        if not token:
            continue
        name, _, value = token.partition("=")
        name = _SERVICE_NAMES.get(name.upper(), name)
        if name == "service":
            service = unquote_plus(value)
        else:
            props[name] = unquote_plus(value)
    hosts_text = props.pop("PGHOST", "") or "localhost"
    ports_text = props.pop("PGPORT", "") or str(DEFAULT_PORT)
    names, numbers = hosts_text.split(","), ports_text.split(",")
    if len(numbers) == 1:
        numbers = numbers * len(names)
    if len(numbers) != len(names):
        return None
    targets = []
    for host, port in zip(names, numbers, strict=True):
        try:
            number = int(port or DEFAULT_PORT)
        except ValueError:
            return None
        targets.append(((host or "localhost").strip("[]"), number))
    database = props.pop("PGDBNAME", "") or None
    return PgTarget(tuple(targets), database, service, props)


def connect(
    url: str,
    user: str | None,
    password: str | None,
    *,
    what: str = "writer.jdbc.url",
    autocommit: bool = False,
    portal: Iterable[landing.Landing] | None = None,
    timeout: int | None = None,
    bounds: landing.Bounds | None = None,
) -> psycopg.Connection:
    """Connect where the URL points (its ``user``/``password`` parameters where not given), judged
    before anything is sent (:mod:`portal.pipeline.landing`, against ``portal``'s databases when
    given); not in autocommit unless asked. ``timeout`` (seconds) bounds the connection and each
    statement, for a page or a monitor that must not hang on a slow server."""
    target = parse_url(url) if url.startswith(PREFIX) else None
    if target is None:
        raise ConfigError(
            f"only jdbc:postgresql:// URLs are supported for publishing, got '{url.split('?')[0]}'"
        )
    conn = psycopg.connect(
        host=",".join(host for host, _ in target.hosts),
        port=",".join(str(port) for _, port in target.hosts),
        dbname=target.database,
        user=user or target.user,
        password=password or target.password,
        service=target.service,
        autocommit=autocommit,
        connect_timeout=timeout,  # None: libpq's default (no parameter is sent)
        options=f"-c statement_timeout={timeout * 1000}" if timeout else None,
    )
    try:
        landing.check(conn, what, portal=portal, bounds=bounds)
        if not autocommit:
            conn.rollback()  # the questions' transaction: the caller's starts clean
    except BaseException:
        conn.close()
        raise
    return conn


def table_ident(name: str) -> sql.Identifier:
    """``schema.table`` or ``table`` as a safely quoted identifier."""
    return sql.Identifier(*[part.strip('"') for part in name.split(".")])
