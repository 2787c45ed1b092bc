"""Where a database connection landed, asked of the server, and the portal's own databases refused.

A data node's URL is text that every driver reads its own way: pgJDBC takes the database from
``?PGDBNAME=`` or ``?dbname=``, from a host-less ``jdbc:postgresql:name``, after percent-decoding,
or from a service file; ``0.0.0.0`` and ``[::ffff:127.0.0.1]`` are this machine. Each spelling a
text check missed reached the portal's own database. So the decision is taken on the
open connection: right after it opens, before the job's first query, the server is asked which
database this is and which server it is (:func:`identify`), and a connection that landed in one of
the portal's own databases is refused with a plain reason (:func:`refuse_portal`). JDBC connections
are opened as Spark opens them (:func:`open_jdbc`: Spark's own connection factory, with the URL,
driver and properties Spark is given), so the driver's own URL parsing is what is judged.

The portal computes its own landings from Django's connections
(``portal.topology.reach.portal_landings``) and hands them over: the worker registers them for its
process (:func:`register`) and writes them into the JobSpec (:data:`SPEC_KEY`, for a driver on a
cluster) with the names of the hop's data nodes that refusals name (:data:`NODES_KEY`); the
portal's Test connection passes them in. This module imports no Django.

What identifies a landing (every value readable by a role without privileges; checked on
PostgreSQL 15 and MariaDB 10.11):

* PostgreSQL: ``current_database()``; the server by ``pg_postmaster_start_time()`` with its port
  and, where the role may execute ``pg_control_system()``, by its ``system_identifier`` (then a
  physical replica or a restored copy of the portal's database is recognised too).
* MySQL/MariaDB: ``DATABASE()``; the server by ``@@hostname``, ``@@port`` and ``@@datadir``.
* SQLite: the main database file, by its real path and by its inode (a link to the portal's file
  is the portal's file).

Two landings are one database when the engine and the database name are equal and they share a
server mark. A connection whose landing cannot be told (an unknown server, a failed question) is
refused too: the check fails closed.

A MySQL/MariaDB connection reads and writes every database of its server through qualified names
(``otherdb.secrets``), so a node's reach is the database it landed in: :func:`own_database` refuses
table names and patterns naming another one, and a connection that landed in no database.

A user-made node's connection is judged further in the same place (``bounds``, from
:mod:`portal.pipeline.usernode`): its owner's own password, no server-wide privilege, a database
its owners may use, no system catalog — and one answer for every refusal, the portal's own
database included.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from portal.pipeline.errors import ConfigError, PipelineError


class Bounds(Protocol):
    """A judged login's bounds (:class:`portal.pipeline.usernode.Bounds`: a user-made node's, or a
    flow's own login on an administrator's node). This module asks them what it needs and never
    imports their module: that module judges connections this one opens."""

    @property
    def hides_reasons(self) -> bool:
        """Does every refusal say the same (a user-made node: no oracle for database names)?"""
        ...

    def to_dict(self) -> dict[str, Any]: ...

    def refusal(self, what: str) -> LandingRefused: ...

    def judge_dbapi(self, connection: Any, found: Landing, what: str) -> None: ...

    def probe(self, options: Mapping[str, str], what: str, portal: Iterable[Landing]) -> Landing: ...

    def catalog_problems(self, names: Mapping[str, Sequence[str]]) -> list[str]: ...


SPEC_KEY = "portal_databases"  # the JobSpec field (kept in JobSpec.extra) the worker fills
POSTGRESQL, MYSQL, SQLITE = "postgresql", "mysql", "sqlite"
PORTAL_REASON = "the connection landed in the portal's own database"

Rows = Callable[[str], list[tuple[Any, ...]]]


class LandingRefused(ConfigError):
    """A connection landed where its data node may not reach; nothing was read or written."""


@dataclass(frozen=True)
class Landing:
    """A database as its server names it: the engine, the database, and marks of the server (or
    of the file, for SQLite) of which any one shared means the same server."""

    engine: str
    database: str
    servers: frozenset[str] = field(default_factory=frozenset)

    def same_database(self, other: Landing) -> bool:
        return (
            self.engine == other.engine
            and self.database == other.database
            and bool(self.servers & other.servers)
        )

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "database": self.database, "servers": sorted(self.servers)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Landing:
        return cls(str(data["engine"]), str(data["database"]), frozenset(str(s) for s in data["servers"]))


# --- asking the server ------------------------------------------------------------------------


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _postgresql(rows: Rows) -> Landing:
    database, port, started, may_read_control = rows(
        "SELECT current_database(), current_setting('port'), "
        "to_char(pg_postmaster_start_time() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), "
        "CASE WHEN has_function_privilege('pg_control_system()', 'EXECUTE') THEN 'y' ELSE 'n' END"
    )[0]
    servers = {f"pg-start:{_text(started)}@{_text(port)}"}
    if _text(may_read_control) == "y":
        (system,) = rows("SELECT system_identifier::text FROM pg_control_system()")[0]
        servers.add(f"pg-system:{_text(system)}")
    return Landing(POSTGRESQL, _text(database), frozenset(servers))


def _mysql(rows: Rows) -> Landing:
    database, host, port, datadir = rows("SELECT DATABASE(), @@hostname, CAST(@@port AS CHAR), @@datadir")[0]
    server = f"mysql:{_text(host)}:{_text(port)}:{_text(datadir)}"
    return Landing(MYSQL, _text(database), frozenset({server}))


def file_marks(path: str) -> frozenset[str]:
    """A database file's marks: its real path and, when it exists, its device and inode."""
    if not path or path == ":memory:" or path.startswith("file:"):
        return frozenset()
    real = os.path.realpath(path)
    marks = {f"file:{real}"}
    try:
        info = os.stat(real)
    except OSError:
        return frozenset(marks)
    marks.add(f"inode:{info.st_dev}:{info.st_ino}")
    return frozenset(marks)


def _sqlite(rows: Rows) -> Landing:
    main = [r for r in rows("PRAGMA database_list") if _text(r[1]) == "main"]
    return Landing(SQLITE, "main", file_marks(_text(main[0][2]) if main else ""))


_ASK = {POSTGRESQL: _postgresql, MYSQL: _mysql, SQLITE: _sqlite}


def dbapi_engine(connection: Any) -> str:
    """The engine of a DB-API connection, by its driver's module ("" for another driver)."""
    module = type(connection).__module__
    if module.startswith("psycopg"):
        return POSTGRESQL
    if module.startswith("pymysql"):
        return MYSQL
    if module.startswith("sqlite3"):
        return SQLITE
    return ""


def identify(connection: Any, engine: str | None = None) -> Landing:
    """The landing of an open DB-API connection (psycopg, PyMySQL, sqlite3; ADBC with ``engine``).
    Only reads; a transaction the questions opened is the caller's to end."""
    kind = engine or dbapi_engine(connection)
    if kind not in _ASK:
        raise LandingRefused(f"cannot tell which database a {type(connection).__name__} connection is")

    def rows(sql: str) -> list[tuple[Any, ...]]:
        cursor = connection.cursor()
        try:
            cursor.execute(sql)
            return [tuple(row) for row in cursor.fetchall()]
        finally:
            cursor.close()

    return _ASK[kind](rows)


def jdbc_engine(product: str) -> str:
    """The engine of a JDBC ``DatabaseMetaData.getDatabaseProductName()``."""
    name = product.lower()
    if "postgres" in name:
        return POSTGRESQL
    if "mysql" in name or "mariadb" in name:
        return MYSQL
    if "sqlite" in name:
        return SQLITE
    return ""


def identify_jdbc(connection: Any) -> Landing:
    """The landing of an open ``java.sql.Connection`` (through py4j)."""
    product = str(connection.getMetaData().getDatabaseProductName())
    kind = jdbc_engine(product)
    if kind not in _ASK:
        raise LandingRefused(f"cannot tell which database a {product} server is")

    def rows(sql: str) -> list[tuple[Any, ...]]:
        statement = connection.createStatement()
        try:
            result = statement.executeQuery(sql)
            width = int(result.getMetaData().getColumnCount())
            found = []
            while result.next():
                found.append(tuple(result.getString(i) for i in range(1, width + 1)))
            return found
        finally:
            statement.close()

    return _ASK[kind](rows)


# --- the portal's own databases ----------------------------------------------------------------

_registered: tuple[Landing, ...] = ()
_lock = threading.Lock()


def register(landings: Iterable[Landing]) -> None:
    """The portal's own databases, for every connection this process opens from now on (the worker
    registers them before each job: a restarted database server gets a new start time)."""
    global _registered
    with _lock:
        _registered = tuple(landings)


def from_spec(extra: Mapping[str, Any] | None) -> tuple[Landing, ...]:
    """The landings a JobSpec carries (its ``extra`` field :data:`SPEC_KEY`)."""
    listed = (extra or {}).get(SPEC_KEY) or []
    return tuple(Landing.from_dict(item) for item in listed if isinstance(item, Mapping))


def portal_databases(extra: Mapping[str, Any] | None = None) -> tuple[Landing, ...]:
    """The portal's own databases this process knows: registered, and those the JobSpec carries."""
    return tuple(dict.fromkeys((*_registered, *from_spec(extra))))


def refuse_portal(found: Landing, what: str, portal: Iterable[Landing], bounds: Bounds | None = None) -> None:
    """Raise when ``found`` is one of the portal's own databases (for a user-made node, saying
    no more than any other refusal of it)."""
    if any(found.same_database(own) for own in portal):
        if bounds is not None and bounds.hides_reasons:
            raise bounds.refusal(what)
        raise LandingRefused(f"{what}: {PORTAL_REASON}")


def check(
    connection: Any,
    what: str,
    *,
    portal: Iterable[Landing] | None = None,
    engine: str | None = None,
    bounds: Bounds | None = None,
) -> Landing:
    """Right after a DB-API connection opened: where it landed, refused if it is the portal's own
    database (or cannot be told), and for a user-made node (``bounds``) unless it is its owner's
    own (:func:`portal.pipeline.usernode.judge`). ``portal`` defaults to :func:`portal_databases`."""
    try:
        found = identify(connection, engine)
    except LandingRefused as error:
        raise LandingRefused(f"{what}: {error}; refused") from None
    except Exception as error:  # the server's own answer: it may not be the database it claims
        raise LandingRefused(
            f"{what}: cannot tell where the connection landed ({_short(error)}); refused"
        ) from None
    refuse_portal(found, what, portal_databases() if portal is None else portal, bounds)
    if bounds is not None:
        bounds.judge_dbapi(connection, found, what)
    return found


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


# --- JDBC through Spark's JVM -----------------------------------------------------------------


def open_jdbc(spark: Any, options: Mapping[str, str]) -> Any:
    """A ``java.sql.Connection`` opened as Spark's JDBC data source opens its own: Spark's
    ``JDBCOptions`` from the very options the reader or writer is given, the URL's ``JdbcDialect`` and
    its connection factory (the driver registered as Spark registers it). Close it."""
    from portal.pipeline.spark.gateway import jvm as jvm_of  # Spark only where a JDBC check runs

    jvm = jvm_of(spark)
    given = jvm.java.util.HashMap()
    for key, value in options.items():
        given.put(key, value)
    url = options["url"]
    parameters = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(given)
    # A table name is required by JDBCOptions; the factory never reads it.
    jdbc = jvm.org.apache.spark.sql.execution.datasources.jdbc.JDBCOptions(url, "fp_landing", parameters)
    factory = jvm.org.apache.spark.sql.jdbc.JdbcDialects.get(url).createConnectionFactory(jdbc)
    return factory.apply(-1)  # the driver's partition id, as Spark's driver-side calls pass it


# A JDBC landing asked of the same options is reused this long: every task of a job builds its
# writer, and a JDBC connection through py4j costs 50-150 ms where a task may take less.
REUSE_SECONDS = 30.0
_asked: dict[str, tuple[float, Landing]] = {}


def _options_key(options: Mapping[str, str]) -> str:
    """The options as a digest (a password is never kept in clear)."""
    text = json.dumps(sorted(options.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def check_jdbc(
    spark: Any,
    options: Mapping[str, str],
    what: str,
    *,
    portal: Iterable[Landing] | None = None,
    bounds: Bounds | None = None,
) -> Landing:
    """Open a JDBC connection as Spark will (:func:`open_jdbc`), judge where it landed, close it.
    A connection that cannot open fails with the driver's own reason (the job would fail on it).
    The landing of the same options asked within :data:`REUSE_SECONDS` is reused (judged again
    against the portal's databases): the connections Spark's executors then open are not asked
    one by one either. A user-made node's (``bounds``) is proved its owner's first by a
    connection of ours with the same options (:func:`portal.pipeline.usernode.probe`), in the
    same database of the same server."""
    own = tuple(portal_databases() if portal is None else portal)
    if bounds is not None:
        proved = _proved(options, bounds) or bounds.probe(options, what, own)
    key, now = _options_key(options), time.monotonic()
    with _lock:
        for stale in [k for k, (at, _) in _asked.items() if now - at >= REUSE_SECONDS]:
            del _asked[stale]
        known = _asked.get(key)
    found = known[1] if known else _ask_jdbc(spark, options, what)
    if known is None:
        with _lock:
            _asked[key] = (now, found)
    refuse_portal(found, what, own, bounds)
    if bounds is not None:
        if not found.same_database(proved):
            raise bounds.refusal(what)
        with _lock:
            _asked[_bounds_key(options, bounds)] = (now, proved)
    return found


def _bounds_key(options: Mapping[str, str], bounds: Bounds) -> str:
    return _options_key({**options, "fp.bounds": json.dumps(bounds.to_dict(), sort_keys=True)})


def _proved(options: Mapping[str, str], bounds: Bounds) -> Landing | None:
    """A probe's landing for the same options and bounds within :data:`REUSE_SECONDS`."""
    with _lock:
        known = _asked.get(_bounds_key(options, bounds))
    return known[1] if known and time.monotonic() - known[0] < REUSE_SECONDS else None


def _ask_jdbc(spark: Any, options: Mapping[str, str], what: str) -> Landing:
    from portal.pipeline.dialects import root_cause  # Spark's types: only where Spark runs

    try:
        connection = open_jdbc(spark, options)
    except Exception as error:
        raise PipelineError(f"{what}: cannot connect: {root_cause(error)[:500]}") from error
    try:
        return identify_jdbc(connection)
    except LandingRefused as error:
        raise LandingRefused(f"{what}: {error}; refused") from None
    except Exception as error:
        raise LandingRefused(
            f"{what}: cannot tell where the connection landed ({_short(error)}); refused"
        ) from None
    finally:
        connection.close()


# --- a MySQL/MariaDB node's own database ------------------------------------------------------

_GLOB = re.compile(r"[*?\[\]%]")


def foreign_names(database: str | None, names: Iterable[str]) -> list[str]:
    """The table names or patterns that name a database other than ``database``: a qualifier that
    is not the database itself (quotes aside), a pattern in the qualifier, more than two parts."""
    found = []
    for name in names:
        parts = name.strip().split(".")
        if len(parts) == 1:
            continue  # the connection's own database
        qualifier = parts[0].strip().strip('`"')
        if len(parts) > 2 or not database or qualifier != database or _GLOB.search(qualifier):
            found.append(name)
    return found


def foreign_problem(key: str, name: str, what: str, database: str | None) -> str:
    own = f"'{database}'" if database else "none named"
    return (
        f"{key}: '{name}' names another database than the one of {what} ({own}); a MySQL/MariaDB "
        "node reaches only its own database"
    )


def own_database(
    found: Landing, names: Mapping[str, Sequence[str]], what: str, bounds: Bounds | None = None
) -> None:
    """MySQL/MariaDB: refuse a connection that landed in no database, and names (by key) that
    reach out of the one it landed in. Other engines: nothing (a PostgreSQL connection cannot read
    another database; a SQLite one has none) — but a user-made node's (``bounds``) names no
    system catalog."""
    if bounds is not None and found.engine == POSTGRESQL:
        for problem in bounds.catalog_problems(names):
            raise LandingRefused(f"{what}: {problem}")
    if found.engine != MYSQL:
        return
    if not found.database:
        raise LandingRefused(
            f"{what}: the connection landed in no database; a MySQL/MariaDB node reaches only its own "
            "database, named in its URL"
        )
    for key, values in names.items():
        outside = foreign_names(found.database, values)
        if outside:
            raise LandingRefused(foreign_problem(key, outside[0], what, found.database))


def url_database(url: str) -> str | None:
    """The database a ``jdbc:mysql:``/``jdbc:mariadb:`` URL names in its path (None: none), as the
    portal can tell it before connecting; the worker asks the connection (``DATABASE()``)."""
    match = re.match(r"^jdbc:(?:mysql|mariadb):(?:[a-z]+:)?//[^/?]*/([^?;]*)", url.strip(), re.I)
    return (match.group(1) or None) if match else None


SOURCE_NAMES = ("source.jdbc.tables", "source.jdbc.tables.exclude")
WRITER_NAMES = ("writer.jdbc.table", "writer.jdbc.marker.table")


def foreign_problems(database: str | None, what: str, names: Mapping[str, str]) -> list[str]:
    """At save, before any connection: of the keys' comma-separated table names and patterns
    (``names``: key -> value), those naming another database than ``database``, the one the
    MySQL/MariaDB node's URL names (the worker asks the connection itself, :func:`own_database`)."""
    problems = []
    for key, value in sorted(names.items()):
        if "${" in value:
            continue  # resolved later, judged by the worker
        listed = [part.strip() for part in value.split(",") if part.strip()]
        problems += [foreign_problem(key, name, what, database) for name in foreign_names(database, listed)]
    return problems


# --- the job's data nodes ------------------------------------------------------------------------

NODES_KEY = "data_nodes"  # the JobSpec field (kept in JobSpec.extra): {"source": name, "destination": name}


def node_what(extra: Mapping[str, Any] | None, role: str, key: str) -> str:
    """How a refusal names a connection: the job's data node of that role (the worker puts the
    names in the JobSpec), else the key whose URL it opened."""
    nodes = (extra or {}).get(NODES_KEY)
    name = nodes.get(role) if isinstance(nodes, Mapping) else None
    return f"data node '{name}'" if name else key
