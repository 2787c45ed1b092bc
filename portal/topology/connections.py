"""Test connection and discovery: what a data node holds, asked from the
portal with a short timeout, before a flow depends on it (Airbyte's "test
the source" and its schema discovery).

How each kind is asked lives with the kind (`portal.pipeline.discovery`:
files, JDBC — PostgreSQL, MySQL/MariaDB and SQLite — and Iceberg; `pipeline.discovery.probes`, by the kind's name);
this module decides what the question carries. The same rules as everywhere keep the
portal's own database and files out of reach: the URL's text first
(`reach.node_problems`), then every connection as it opens, before the
test's first question (`portal.pipeline.landing`: the portal's own database
is refused wherever the URL led; a user-made node within its owner's bounds).
A JDBC node's own account is the one used; credentials typed for a test serve
a node without one, for that test only, never stored. The views ask
`access.may_use` first, so a user tests only nodes granted to them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import pymysql
from django.conf import settings

from portal.crypto.encrypted import decrypt_properties
from portal.crypto.errors import DecryptionError
from portal.pipeline import usernode
from portal.pipeline.discovery import files as files_probe
from portal.pipeline.discovery import iceberg as iceberg_probe
from portal.pipeline.discovery import jdbc as jdbc_probe
from portal.pipeline.discovery.probes import probe_for
from portal.pipeline.discovery.shapes import (
    Asking,
    Column,
    ConnectionResult,
    Dataset,
    Discovery,
    failure,
    mark_candidates,
)
from portal.pipeline.nodekinds import jdbc
from portal.topology import policy, reach
from portal.topology.models import DataNode

__all__ = [
    "Column",
    "ConnectionResult",
    "Dataset",
    "Discovery",
    "PreviewRefused",
    "Rows",
    "discover",
    "discover_folder",
    "mark_candidates",
    "preview_iceberg",
    "preview_table",
    "test_connection",
]


def _timeout() -> int:
    return settings.TOPOLOGY_CONNECTION_TIMEOUT_SECONDS


def _refusal(node: DataNode) -> str | None:
    problems = reach.node_problems(node.kind, dict(node.properties or {}))
    if node.user_made and set(problems) & {"url", "catalog.uri"}:  # said as every such refusal is
        return f"data node '{node.name}': {usernode.REFUSED}"  # REFUSED says "refused:" itself
    if problems:
        return "Refused: " + "; ".join(f"{key}: {reason}" for key, reason in sorted(problems.items()))
    return None


def _asking(node: DataNode, user: str = "", password: str = "") -> Asking:
    """The question to `node`, with what the portal decided: its login (a JDBC node's own account,
    else the one typed; an Iceberg catalog's typed password), the timeout, the portal's own
    databases and a user-made node's bounds."""
    properties = dict(node.properties or {})
    if node.kind == DataNode.Kind.JDBC:
        user, password = _credentials(node, str(properties.get("url", "")), user, password)
    connects = node.kind != DataNode.Kind.FILES  # a folder is read, no connection opened
    return Asking(
        name=node.name,
        properties=properties,
        timeout=_timeout(),
        data_dir=str(settings.FLOWPORT_DATA_DIR),
        portal=reach.portal_landings() if connects else (),
        bounds=policy.bounds_for(node) if connects else None,
        user=user,
        password=password,
    )


def test_connection(node: DataNode, *, user: str = "", password: str = "") -> ConnectionResult:
    """Never raises: every failure is a result with the reason."""
    if (refused := _refusal(node)) is not None:
        return ConnectionResult(False, refused)
    probe = probe_for(node.kind)
    if probe is None:
        return ConnectionResult(False, f"The portal cannot test a {node.get_kind_display()} node.")
    try:
        return probe.test(_asking(node, user, password))
    except Exception as error:  # the portal's own side of the question (its landings, the bounds)
        return ConnectionResult(False, failure(error))


def discover(node: DataNode, *, user: str = "", password: str = "") -> Discovery:
    if (refused := _refusal(node)) is not None:
        return Discovery(False, refused)
    probe = probe_for(node.kind)
    if probe is None:
        return Discovery(False, f"The portal cannot discover a {node.get_kind_display()} node.")
    try:
        return probe.discover(_asking(node, user, password))
    except Exception as error:
        return Discovery(False, failure(error))


def discover_folder(node: DataNode, folder: str) -> Discovery:
    """Discovery of the data files in one folder below a files node's root (an upstream flow's
    output, ``<flowGroup>/<flowName>``), named relative to that folder; never outside the root."""
    if (refused := _refusal(node)) is not None:
        return Discovery(False, refused)
    if node.kind != DataNode.Kind.FILES:
        return Discovery(False, f"'{node.name}' is not a files node.")
    return files_probe.discover(_asking(node), folder)


def _credentials(node: DataNode, url: str, user: str, password: str) -> tuple[str, str]:
    """The node's own `user` and `password` (decrypted here, in memory: what a flow over the node
    connects with), else typed for the test, else the URL's own `user`/`password` parameters. As for
    a flow (:func:`portal.pipeline.jobspec.with_node_credentials`), one may type an account only for
    a node without one: a user of a node does not choose who the database takes them for."""
    stored = _stored_credentials(node)
    if stored[0] or stored[1]:
        return stored
    query = {k.lower(): v for k, v in parse_qs(url.partition("?")[2].replace(";", "&")).items()}
    in_url = (query.get("user") or query.get("username") or [""])[0], (query.get("password") or [""])[0]
    if in_url[0] or in_url[1] or jdbc.url_has_login(url):  # the node's account, kept in its URL (any
        # spelling its driver reads): no typed one replaces it
        return in_url
    return user, password


def _stored_credentials(node: DataNode) -> tuple[str, str]:
    properties = {k: v for k, v in (node.properties or {}).items() if isinstance(v, str)}
    if properties.get("password"):
        try:
            properties = decrypt_properties(properties)
        except DecryptionError:  # Test connection then says the database's own refusal
            properties.pop("password")
    return properties.get("user", ""), properties.get("password", "")


# --- preview ----------------------------------------------------------------------------

PREVIEW_MAX_ROWS = 20
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}\Z")


@dataclass
class Rows:
    """The first rows of a table: its column names and the rows' values as read."""

    columns: list[str]
    rows: list[tuple[Any, ...]]


class PreviewRefused(Exception):
    """The table cannot be previewed (refused, unsupported, or the database said no); the
    message says why, as Test connection would."""


def _quoted(table: str, quote: str) -> str:
    parts = table.split(".")
    if not 1 <= len(parts) <= 2 or not all(_PLAIN_NAME.match(part) for part in parts):
        raise PreviewRefused(f"'{table[:120]}' is not a table name the portal previews (schema.table).")
    return ".".join(f"{quote}{part}{quote}" for part in parts)


def preview_table(node: DataNode, table: str, limit: int = PREVIEW_MAX_ROWS) -> Rows:
    """The first `limit` rows of `table` of a JDBC node (`SELECT * … LIMIT`), through the same
    rules as Test connection and discovery: the node's URL judged first, the connection judged
    where it landed before the question, the node's own account, the short timeouts."""
    if (refused := _refusal(node)) is not None:
        raise PreviewRefused(refused)
    if node.kind != DataNode.Kind.JDBC:
        raise PreviewRefused(f"The portal previews tables of JDBC nodes only, not of '{node.name}'.")
    limit = max(1, min(int(limit), PREVIEW_MAX_ROWS))
    try:
        with jdbc_probe.connect(_asking(node)) as database:
            quote = "`" if isinstance(database.connection, pymysql.connections.Connection) else '"'
            cursor = database.connection.cursor()
            try:
                cursor.execute(f"SELECT * FROM {_quoted(table, quote)} LIMIT {limit}")  # noqa: S608
                columns = [str(column[0]) for column in cursor.description or []]
                rows = [tuple(row) for row in cursor.fetchmany(limit)]
            finally:
                cursor.close()
    except PreviewRefused:
        raise
    except Exception as error:  # a refusal, or the driver's own message, whatever the driver
        raise PreviewRefused(failure(error)) from error
    return Rows(columns, rows)


def preview_iceberg(node: DataNode, identifier: str, limit: int = PREVIEW_MAX_ROWS) -> Rows:
    """The first `limit` rows of Iceberg table `identifier` (``namespace.table``) of a node whose
    SQL catalog needs no password (a catalog's password is a flow's secret, not the node's): the
    catalog judged where it lands as Test connection judges it, its files read only inside the
    node's warehouse (`load_catalog`'s confinement), at most `limit` rows scanned."""
    if (refused := _refusal(node)) is not None:
        raise PreviewRefused(refused)
    if node.kind != DataNode.Kind.ICEBERG:
        raise PreviewRefused(f"'{node.name}' is not an Iceberg node.")
    parts = identifier.split(".")
    if len(parts) != 2 or not all(_PLAIN_NAME.match(part) for part in parts):
        raise PreviewRefused(f"'{identifier[:120]}' is not an Iceberg table name the portal previews.")
    limit = max(1, min(int(limit), PREVIEW_MAX_ROWS))
    try:
        table = iceberg_probe.catalog(_asking(node)).load_table((parts[0], parts[1]))
        arrow = table.scan(limit=limit).to_arrow()
    except Exception as error:  # a refusal, pyiceberg's, SQLAlchemy's and the driver's own message
        raise PreviewRefused(failure(error)) from error
    return Rows(list(arrow.schema.names), [tuple(row.values()) for row in arrow.to_pylist()[:limit]])
