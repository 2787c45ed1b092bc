"""What a data node a user makes for themselves may reach: the administrators' policy.

Set in the environment (README's configuration table): which kinds users may make
(`USER_NODE_KINDS`), which database servers their JDBC nodes and Iceberg catalogs may name
(`USER_NODE_DATABASE_HOSTS`, `host:port` patterns matched on the URL as written) and the
databases they may land in (`USER_NODE_DATABASES`, name patterns with `{user}` and `{group}`,
judged on the open connection with the rest of `portal.pipeline.usernode`: the owner's own
password, no server-wide privilege; `bounds_for`), the folders
their files nodes and Iceberg warehouses lie in (`USER_NODE_FILES_AREAS`: a personal area
`users/{user}` and an area per group `groups/{group}` under FLOWPORT_DATA_DIR by default, plus
the folders an administrator opens to a user or group in Django's admin, `NodeArea`) and how
many nodes one user may make (`USER_NODE_MAX_PER_USER`).

A user-made node also says less than an administrator's: a JDBC URL is one server and one
database, with only the parameters listed below (no socket factories, logger files, local
infile or class names: those make a driver run code or touch the portal's files); its driver is
the dialect's own; its other properties are the user and the password (typed, stored
`ENC(...)`). Each problem names the property (`url: …`) or the field (`kind`), so the API
answers 400 naming it and the form shows it at the field. What every node is refused anyway —
the portal's own database and files — is `reach.py`'s, checked by `DataNode.clean` after this.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db.models import Q

from portal.accounts.access import Principal, account, is_account
from portal.pipeline import nodekinds, usernode
from portal.pipeline.confinement import has_parent_segment, is_inside
from portal.pipeline.dialects import dialect_for
from portal.pipeline.errors import ConfigError
from portal.pipeline.nodekinds import jdbc
from portal.pipeline.usernode import Bounds
from portal.topology import nodefields
from portal.topology.models import DataNode, NodeArea
from portal.topology.reach import node_root
from portal.topology.validators import USER_NODE_KINDS

# One server, one database: jdbc:<sub>://host[:port]/database[?name=value&...]
_JDBC_URL = re.compile(
    r"^jdbc:(?P<sub>postgresql|mysql|mariadb)://(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?/(?P<database>[A-Za-z0-9_$-]{1,64})(?:\?(?P<params>[^#\s]*))?\Z"
)
_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306}
# URL parameters that only tune the connection (compared without case). Anything else — a socket
# or SSL factory, a logger file, local infile, interceptors, another host or database, a user or
# password (Spark's driver takes the URL's over the node's, which the portal's probe would not
# log in as) — is refused.
_URL_PARAMETERS = {
    "postgresql": {
        "applicationname",
        "connecttimeout",
        "currentschema",
        "defaultrowfetchsize",
        "logintimeout",
        "preparethreshold",
        "readonly",
        "rewritebatchedinserts",
        "sockettimeout",
        "ssl",
        "sslmode",
        "stringtype",
        "tcpkeepalive",
    },
    "mysql": {
        "characterencoding",
        "connecttimeout",
        "defaultfetchsize",
        "rewritebatchedstatements",
        "servertimezone",
        "sockettimeout",
        "sslmode",
        "tinyint1isbit",
        "usecursorfetch",
        "usessl",
        "useunicode",
        "zerodatetimebehavior",
    },
}
_URL_PARAMETERS["mariadb"] = _URL_PARAMETERS["mysql"]
# A name that is one plain folder: what a user or group gets an area under.
_SEGMENT = re.compile(r"^[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]{0,149}\Z")


@dataclass(frozen=True)
class Policy:
    kinds: tuple[str, ...]
    database_hosts: tuple[str, ...]
    files_areas: tuple[str, ...]
    max_per_user: int
    databases: tuple[str, ...] = ("{user}", "{user}_*", "{group}_*")
    replication: bool = False


def current() -> Policy:
    """The policy as the settings give it now (tests change them)."""
    return Policy(
        kinds=tuple(k for k in _listed("USER_NODE_KINDS", ",".join(USER_NODE_KINDS)) if k in USER_NODE_KINDS),
        database_hosts=tuple(
            h.lower()
            for h in _listed(
                "USER_NODE_DATABASE_HOSTS", "127.0.0.1:5432,localhost:5432,127.0.0.1:3306,localhost:3306"
            )
        ),
        files_areas=tuple(_listed("USER_NODE_FILES_AREAS", "users/{user},groups/{group}")),
        max_per_user=int(getattr(settings, "USER_NODE_MAX_PER_USER", 20)),
        databases=tuple(_listed("USER_NODE_DATABASES", "{user},{user}_*,{group}_*")),
        replication=bool(getattr(settings, "USER_NODE_ALLOW_REPLICATION", False)),
    )


def _listed(name: str, default: str) -> list[str]:
    value = getattr(settings, name, None)
    items = value.split(",") if isinstance(value, str) else value if value is not None else default.split(",")
    return [str(item).strip() for item in items if str(item).strip()]


# --- files areas ------------------------------------------------------------------------


def _plain(name: str) -> bool:
    """A user or group name that is one folder: not '.', '..', and nothing that splits a path."""
    return bool(_SEGMENT.match(name)) and name not in (".", "..")


def areas_for(user: Principal, policy: Policy | None = None) -> list[str]:
    """The folders (absolute, as node roots are read) `user`'s files nodes may lie in: their
    personal area, their groups' areas and the folders opened to them or their groups. A user or
    group whose name is not one plain folder gets no area from a template (`users/..` would be
    every user's)."""
    if not is_account(user) or not user.pk:
        return []
    policy = policy or current()
    groups = [g for g in Group.objects.filter(user=user).values_list("name", flat=True) if _plain(g)]
    username = user.get_username()
    roots: list[str] = []
    for template in policy.files_areas:
        if "{group}" in template:
            roots += [template.replace("{group}", group) for group in groups if "{user}" not in template]
        elif "{user}" in template:
            if _plain(username):
                roots.append(template.replace("{user}", username))
        else:
            roots.append(template)
    opened = NodeArea.objects.filter(Q(user=user) | Q(group__user=user)).values_list("path", flat=True)
    roots += list(opened)
    return list(dict.fromkeys(node_root(root) for root in roots if "://" not in root))


def personal_area(user: Principal) -> str | None:
    """Where the form suggests a user's first files node: their own area, if they have one."""
    for template in current().files_areas:
        if "{user}" in template and "{group}" not in template and _plain(user.get_username()):
            return template.replace("{user}", user.get_username())
    return None


def _area_problem(value: str, areas: list[str], what: str) -> str | None:
    if "://" in value:
        return f"'{value}' is not a local folder; a user-made node lies in one of your areas"
    if has_parent_segment(value):
        return f"'{value}' has a '..' segment; give the folder itself"
    root = node_root(value)
    if any(is_inside(root, area) for area in areas):
        return None
    shown = ", ".join(_shown(area) for area in areas) or "none (ask an administrator)"
    return f"'{value}' is outside your areas; a user-made {what} lies in one of: {shown}"


def _shown(area: str) -> str:
    """An area as a user writes it: relative to FLOWPORT_DATA_DIR where it is below it."""
    data = str(Path(settings.FLOWPORT_DATA_DIR))
    return area[len(data) + 1 :] if area.startswith(data + "/") else area


# --- databases ---------------------------------------------------------------------------


def host_allowed(host: str, port: int, policy: Policy | None = None) -> bool:
    """`host:port` against the patterns (`db.example.org:5432`, `*.example.org:*`, `10.0.0.7`: any
    port), as written in the URL: no name is resolved, so a pattern names what it allows."""
    address = f"{host.lower()}:{port}"
    for pattern in (policy or current()).database_hosts:
        if ":" not in pattern.replace("[", "").split("]")[-1]:
            pattern = f"{pattern}:*"
        if fnmatch.fnmatchcase(address, pattern):
            return True
    return False


def jdbc_url_problem(url: str, policy: Policy | None = None) -> str | None:
    """Why a user-made node may not have this JDBC URL, or None."""
    policy = policy or current()
    match = _JDBC_URL.match(url.strip())
    if not match:
        return (
            f"'{url}' is not jdbc:postgresql://host:port/database (or jdbc:mysql:, jdbc:mariadb:) with one "
            "host and a database; a user-made node names one server and one database"
        )
    sub = match["sub"]
    port = int(match["port"] or _DEFAULT_PORTS[sub])
    host = match["host"].strip("[]")
    if not host_allowed(host, port, policy):
        allowed = ", ".join(policy.database_hosts) or "none"
        return (
            f"{host}:{port} is not a database server user-made nodes may reach "
            f"(USER_NODE_DATABASE_HOSTS: {allowed})"
        )
    for item in re.split(r"[&;]", match["params"] or ""):
        name = item.partition("=")[0]
        if item and name.lower() not in _URL_PARAMETERS[sub]:
            allowed = ", ".join(sorted(_URL_PARAMETERS[sub]))
            return f"the URL parameter {name!r} is not one a user-made node may set ({allowed})"
    return None


def _catalog_problem(uri: str, areas: list[str], policy: Policy, user: Principal | None = None) -> str | None:
    from sqlalchemy.engine import make_url  # SQLAlchemy reads the catalog URL as pyiceberg will
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(uri)
    except ArgumentError:
        return None  # reach.catalog_problems says what is wrong with it
    if parsed.get_backend_name() == "sqlite":
        return _area_problem(parsed.database or "", areas, "Iceberg catalog file")
    if parsed.get_backend_name() == "postgresql":
        host, port = parsed.host or "localhost", parsed.port or 5432
        if set(parsed.query) - {"sslmode", "application_name", "connect_timeout"}:
            return "a user-made catalog URL takes only sslmode, application_name and connect_timeout"
        if not host_allowed(host, port, policy):
            return (
                f"{host}:{port} is not a database server user-made nodes may reach (USER_NODE_DATABASE_HOSTS)"
            )
        return database_problem(
            f"jdbc:postgresql://{host}:{port}/{parsed.database or '-'}", user, policy=policy
        )
    return None


def database_patterns(users: list[str], groups: list[str], policy: Policy | None = None) -> tuple[str, ...]:
    """The policy's database patterns filled in for these user and group names (`{username}`
    reads as `{user}`); a name that is not one plain word fills in nothing."""
    found: list[str] = []
    for template in (policy or current()).databases:
        template = template.replace("{username}", "{user}")
        if "{user}" in template and "{group}" in template:
            continue
        if "{user}" in template:
            found += [template.replace("{user}", name) for name in users if _plain(name)]
        elif "{group}" in template:
            found += [template.replace("{group}", name) for name in groups if _plain(name)]
        else:
            found.append(template)
    return tuple(dict.fromkeys(found))


def bounds_for(node: DataNode | None, policy: Policy | None = None) -> Bounds | None:
    """What a node's connections may be. A user-made node's: the databases of its maker, of the
    groups owning it and of its maker's groups — not those of a user made a co-owner, who never
    agreed that the maker's node may land in their databases (a node made by staff for its owners
    takes its owning users'). An administrator's database node without an account of its own
    takes each flow's login, judged as a user-made node's is (`usernode.FLOW_LOGIN`). None for
    every other node: the administrator's account is trusted."""
    if node is None:
        return None
    if not node.user_made:
        return usernode.FLOW_LOGIN if takes_flow_login(node) else None
    policy = policy or current()
    owners = node.grants.filter(role="owner")
    groups = [*owners.exclude(group=None).values_list("group__name", flat=True)]
    if node.created_by is not None:
        users = [node.created_by.get_username()]
        groups += list(node.created_by.groups.values_list("name", flat=True))
    else:
        users = [*owners.exclude(user=None).values_list("user__username", flat=True)]
    return Bounds(database_patterns(users, groups, policy), replication=policy.replication)


def takes_flow_login(node: DataNode) -> bool:
    """Is ``node`` a JDBC node on a database server naming no user of its own?
    (`nodekinds.jdbc.takes_flow_login` says why its flows' logins are judged.)"""
    return node.kind == DataNode.Kind.JDBC and jdbc.takes_flow_login(node.properties or {})


def bounds_named(name: str | None) -> Bounds | None:
    """`bounds_for` the data node of this name (None: a trusted account, or no such node)."""
    return bounds_for(DataNode.objects.filter(name=name).first()) if name else None


def database_problem(
    url: str, user: Principal | None, group: Any = None, policy: Policy | None = None
) -> str | None:
    """At save, before any connection: a user-made JDBC node's URL names a database its owners may
    not use (the open connection is judged again where it lands). Said as every such refusal is
    said, whatever the database is called (`usernode.REFUSED`)."""
    match = _JDBC_URL.match(url.strip())
    if match is None:
        return None
    users = [user.get_username()] if user is not None else []
    groups = list(Group.objects.filter(user=user).values_list("name", flat=True)) if is_account(user) else []
    if group is not None:
        groups.append(group.name)
    patterns = database_patterns(users, groups, policy)
    if Bounds(patterns).allows_database(match["database"]):
        return None
    return usernode.REFUSED


# --- the whole check ---------------------------------------------------------------------


def problems(  # noqa: C901
    user: Principal, kind: str, properties: dict[str, Any], policy: Policy | None = None
) -> dict[str, str]:
    """Field (`kind`) or property (`url`, `path`, …) → why a node `user` makes or changes may not
    be so. Empty when the policy allows it."""
    policy = policy or current()
    if kind not in policy.kinds:
        allowed = ", ".join(policy.kinds) or "none"
        return {"kind": f"users may make data nodes of these kinds: {allowed} (not {kind!r})"}
    found: dict[str, str] = {}
    allowed_keys = nodekinds.user_properties(kind)
    for key in sorted(properties):
        if key not in allowed_keys:
            found[key] = (
                f"not a property a user-made {kind} node may set (it may set {', '.join(allowed_keys)})"
            )
    values = {key: value for key, value in properties.items() if isinstance(value, str)}
    for spec in nodefields.fields_of(kind):
        if spec.required and not values.get(spec.key):
            found[spec.key] = f"required: {spec.label.lower()}"
    if kind == "jdbc":
        url = values.get("url", "")
        reason = jdbc_url_problem(url, policy) if url else None
        reason = reason or (database_problem(url, user, policy=policy) if url else None)
        if reason:
            found["url"] = reason
        driver = values.get("driver", "")
        if driver and url and not reason:
            try:
                expected = dialect_for(url, "url").driver
            except ConfigError:
                expected = ""
            if driver != expected:
                found["driver"] = (
                    f"a user-made node uses its database's own driver ({expected}); leave it empty"
                )
    elif kind in ("files", "iceberg"):
        areas = areas_for(user, policy)
        keys = ("path",) if kind == "files" else ("warehouse", "catalog.uri")
        for key in keys:
            value = values.get(key, "")
            if not value:
                continue  # required: the model's and reach's checks say so
            what = "files node" if key == "path" else "Iceberg warehouse"
            reason = (
                _area_problem(value, areas, what)
                if key != "catalog.uri"
                else _catalog_problem(value, areas, policy, user)
            )
            if reason:
                found[key] = reason
    return found


def quota_problem(user: Principal, policy: Policy | None = None) -> str | None:
    """Why `user` may make no more nodes now, or None."""
    limit = (policy or current()).max_per_user
    made = DataNode.objects.filter(user_made=True, created_by=account(user)).count()
    if made >= limit:
        return (
            f"You have made {made} data nodes, the most one user may (USER_NODE_MAX_PER_USER={limit}); "
            "delete one first."
        )
    return None
