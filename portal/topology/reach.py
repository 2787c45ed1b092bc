"""What no data node may reach: the portal's own database and its secrets.

A flow reads and writes only through its data nodes, so keeping the portal's database, master
key, Django secret key and work area out of every node keeps them out of every flow. Checked when
a node is created or changed (`DataNode.clean`), by the worker before each job
(`orchestration.worker.guard`), and when a worker starts (`portal_secrets_problems`).

For databases those checks read the URL's text (`jdbc_url_problem`, as pgJDBC reads a URL): a fast
first refusal, not the decision. The decision is taken on every connection as it opens
(`portal.pipeline.landing`), against the portal's own databases as their servers name them
(`portal_landings`), which the worker hands to the pipeline and Test connection passes in.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from pathlib import Path

from django.conf import settings
from django.db import connections

from portal.pipeline import landing
from portal.pipeline.confinement import contains, has_parent_segment
from portal.pipeline.jdbcurls import DEFAULT_PORTS as _DEFAULT_PORTS
from portal.pipeline.jdbcurls import jdbc_target as _jdbc_target
from portal.pipeline.nodekinds import iceberg as iceberg_kind
from portal.pipeline.nodekinds.kind import rooted


def node_root(path: str) -> str:
    """A files node's root: relative node paths are relative to FLOWPORT_DATA_DIR."""
    return rooted(path, settings.FLOWPORT_DATA_DIR)


def master_key_path() -> str:
    return str(settings.FLOWPORT_MASTER_KEY_FILE or Path(settings.VAR_DIR) / "master-key")


def portal_secret_paths() -> dict[str, str]:
    """What a files node must never contain, by what it is."""
    paths = {
        "the portal's master key": master_key_path(),
        "the portal's secret key": str(Path(settings.VAR_DIR) / "secret_key"),
        "the portal's work area (other flows' task output)": str(settings.FLOWPORT_WORK_DIR),
    }
    for alias in connections:
        db = connections[alias].settings_dict
        if db.get("ENGINE", "").endswith("sqlite3") and db.get("NAME"):
            paths["the portal's database"] = str(db["NAME"])
    return paths


def files_root_problem(path: str) -> str | None:
    """Why a files node with this path would expose the portal, or None."""
    if has_parent_segment(path):
        return f"'{path}' has a '..' segment; give the node's real root"
    root = node_root(path)
    for what, secret in portal_secret_paths().items():
        if contains(root, secret):
            return f"'{path}' contains {what}; a data node must lie outside the portal's own files"
    for what, private in portal_private_folders().items():
        if contains(private, root):
            return f"'{path}' lies inside {what}; a data node must lie outside the portal's own files"
    if contains(str(settings.VAR_DIR), root) and not contains(str(settings.FLOWPORT_DATA_DIR), root):
        return (
            f"'{path}' lies inside the portal's state folder (FLOWPORT_VAR_DIR) outside its data folder "
            "(FLOWPORT_DATA_DIR); a data node must lie outside the portal's own files"
        )
    return None


def portal_private_folders() -> dict[str, str]:
    """Folders no node root may lie inside (the other way round from `portal_secret_paths`)."""
    return {
        "the portal's work area (other flows' task output)": str(settings.FLOWPORT_WORK_DIR),
        "the portal's job logs": str(settings.FLOWPORT_LOG_DIR),
    }


def _ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address as the kernel connects to it: ``::ffff:127.0.0.1`` is 127.0.0.1."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _addresses(host: str) -> set[str]:
    try:
        infos = socket.getaddrinfo(host.strip("[]"), None)
    except (OSError, UnicodeError):
        return set()
    found = set()
    for info in infos:
        ip = _ip(str(info[4][0]))  # typeshed allows an int (AF_CAN); IPs are text
        if ip is not None:
            found.add(str(ip))
    return found


def _local_addresses() -> set[str]:
    found = _addresses(socket.gethostname()) | _addresses("localhost")
    return found | {"127.0.0.1", "::1"}


def _same_server(a: str, b: str) -> bool:
    """Host names of the same server, as far as name resolution can tell (aliases, loopback, and
    the any-address 0.0.0.0 or ``::``, which a connection takes for this machine)."""
    if a.lower() == b.lower():
        return True
    left, right = _addresses(a), _addresses(b)
    if left & right:
        return True
    local = _local_addresses()

    def is_local(addresses: set[str]) -> bool:
        ips = [_ip(x) for x in addresses]
        return bool(ips) and all(
            ip is not None and (str(ip) in local or ip.is_loopback or ip.is_unspecified) for ip in ips
        )

    return is_local(left) and is_local(right)


def _portal_databases() -> list[tuple[str, str, int, str]]:
    """(engine kind, host, port, name) of each of the portal's databases (the test one included)."""
    found = []
    for alias in connections:
        db = connections[alias].settings_dict
        engine = db.get("ENGINE", "")
        kind = "postgresql" if "postgresql" in engine else "mysql" if "mysql" in engine else "sqlite"
        names = {str(db.get("NAME") or "")}
        test_name = (db.get("TEST") or {}).get("NAME")
        if test_name:
            names.add(test_name)
        for name in names:
            try:
                port = int(db.get("PORT") or _DEFAULT_PORTS.get(kind, 0))
            except ValueError:
                port = 0
            found.append((kind, db.get("HOST") or "localhost", port, name))
    return found


def jdbc_url_problem(url: str) -> str | None:
    """Why a JDBC node with this URL would reach the portal's own database, or None."""
    target = _jdbc_target(url)
    if target is None:
        return None
    sub, hosts, database = target
    for kind, host, port, name in _portal_databases():
        if kind == "sqlite":
            if sub == "sqlite" and name and database and contains(database.split("?")[0], name):
                return "it points at the portal's own database"
            continue
        if sub not in (kind, "mariadb" if kind == "mysql" else kind):
            continue
        if database is not None and database != name:  # no database: the user's, maybe the portal's
            continue
        if any(p == port and _same_server(h, host) for h, p in hosts):
            return "it points at the portal's own database (the same server and database)"
    return None


def node_problems(kind: str, properties: dict[str, str]) -> dict[str, str]:
    """Field -> reason for a data node that would put the portal's own data, or more than its own
    database, in reach."""
    problems = _secret_problems(kind, properties)
    for key in ("url", "jdbc.url"):
        url = properties.get(key)
        if key in problems or not isinstance(url, str) or not url:
            continue
        if re.match(r"^jdbc:(mysql|mariadb):", url.strip(), re.I) and not landing.url_database(url):
            problems[key] = (
                f"'{url}' names no database; a MySQL/MariaDB node reaches only its own database, "
                "named in its URL (jdbc:mariadb://host:3306/database)"
            )
    return problems


def _secret_problems(kind: str, properties: dict[str, str]) -> dict[str, str]:
    """Field -> reason for a data node that would put the portal's own data in reach."""
    problems = {}
    path = properties.get("path")
    if kind == "files" and isinstance(path, str) and path:
        reason = files_root_problem(path)
        if reason:
            problems["path"] = reason
    if kind == "iceberg":
        problems.update(catalog_problems(properties))
    for key in ("url", "jdbc.url"):
        url = properties.get(key)
        if isinstance(url, str) and url:
            reason = jdbc_url_problem(url)
            if reason:
                problems[key] = f"'{url}': {reason}; the portal's database cannot be a data node"
    return problems


def portal_landings() -> list[landing.Landing]:
    """The portal's own databases as their servers name them (`portal.pipeline.landing`): each of
    Django's connections asked where it landed, with its configured names (the test database's
    too) on the same server."""
    found: list[landing.Landing] = []
    for alias in connections:
        connection = connections[alias]
        db = connection.settings_dict
        engine_name = db.get("ENGINE", "")
        engine = (
            landing.POSTGRESQL
            if "postgresql" in engine_name
            else landing.MYSQL
            if "mysql" in engine_name
            else landing.SQLITE
        )
        names = {str(db.get("NAME") or ""), str((db.get("TEST") or {}).get("NAME") or "")} - {""}
        connection.ensure_connection()
        own = landing.identify(connection.connection, engine)
        found.append(own)
        if engine == landing.SQLITE:
            found += [
                landing.Landing(engine, "main", marks) for n in names if (marks := landing.file_marks(n))
            ]
        else:
            found += [landing.Landing(engine, name, own.servers) for name in names]
    return list(dict.fromkeys(found))


def catalog_uri(uri: str) -> str:
    """An Iceberg node's SQL catalog URL as the pipeline gets it (its kind's binding): a relative
    SQLite path is made absolute under FLOWPORT_DATA_DIR (like a files node's root)."""
    return iceberg_kind.catalog_uri(uri, settings.FLOWPORT_DATA_DIR)


def _catalog_uri_problem(uri: str) -> str | None:
    from sqlalchemy.engine import make_url  # SQLAlchemy parses the catalog URL as pyiceberg will
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(catalog_uri(uri))
    except ArgumentError:
        parsed = None
    if parsed is None or parsed.get_backend_name() not in ("sqlite", "postgresql"):
        return (
            f"'{uri}' is not a sqlite:///… or postgresql+psycopg://… URL (the SQL catalogs Flowport speaks)"
        )
    if parsed.password:
        return (
            "the URL holds a password in clear; leave it out and give it in the flow as "
            "writer.iceberg.catalog.password=ENC(...)"
        )
    if parsed.get_backend_name() == "sqlite":
        return files_root_problem(parsed.database or "") or jdbc_url_problem(f"jdbc:sqlite:{parsed.database}")
    host, port = parsed.host or "localhost", parsed.port or 5432
    reason = jdbc_url_problem(f"jdbc:postgresql://{host}:{port}/{parsed.database or ''}")
    return f"'{uri}': {reason}; the portal's database cannot be a data node" if reason else None


def catalog_problems(properties: dict[str, str]) -> dict[str, str]:
    """Field -> reason for an Iceberg node's catalog URL and warehouse: a SQLite or PostgreSQL URL
    without a password of its own, and neither the portal's database nor its files."""
    problems: dict[str, str] = {}
    uri = properties.get("catalog.uri")
    if not isinstance(uri, str) or not uri:
        problems["catalog.uri"] = "required: the Iceberg catalog's SQLAlchemy URL"
    else:
        reason = _catalog_uri_problem(uri)
        if reason:
            problems["catalog.uri"] = reason
    warehouse = properties.get("warehouse")
    if not isinstance(warehouse, str) or not warehouse:
        problems["warehouse"] = "required: the folder of the tables' files"
    else:
        reason = files_root_problem(warehouse)
        if reason:
            problems["warehouse"] = reason
    return problems


def portal_secrets_problems(nodes) -> list[str]:
    """One line per data node that can reach the master key or the portal database (a worker
    refuses to start while there is one)."""
    return [
        f"data node {node.name!r}: {reason}"
        for node in nodes
        for reason in _secret_problems(node.kind, dict(node.properties or {})).values()
    ]
