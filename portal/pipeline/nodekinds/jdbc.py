"""A database reached by JDBC: the JDBC source reads it (on a flow's first hop), the JDBC writer
writes into it. Its login, when it has one, is the node's: a flow may read or write through a
node, not choose who the database takes it for."""

from __future__ import annotations

import re
from collections.abc import Mapping

from portal.pipeline.nodekinds.kind import DESTINATION, SOURCE, Field, Hop, NodeKind
from portal.pipeline.propertyrules import JDBC_SOURCE_CLASS

FIELDS = (
    Field(
        "url",
        "JDBC URL",
        "Where the database is.",
        required=True,
        placeholder="jdbc:postgresql://db.example.org:5432/sales",
    ),
    Field(
        "driver",
        "JDBC driver class",
        "Empty: the database's own driver (PostgreSQL, MariaDB for MySQL and MariaDB).",
        placeholder="org.postgresql.Driver",
    ),
    Field("user", "Database user", "The user the node connects as."),
    Field(
        "password",
        "Password",
        "Typed here, stored encrypted under its owner's customer key; shown to nobody.",
    ),
)

SOURCE_CLASS = JDBC_SOURCE_CLASS
WRITER_FORMAT = "jdbc"

# Where each role's component reads the connection and the login.
_PREFIX = {SOURCE: "source.jdbc.", DESTINATION: "writer.jdbc."}
LOGIN_KEYS = {
    SOURCE: ("source.conn.username", "source.conn.password"),
    DESTINATION: ("writer.jdbc.username", "writer.jdbc.password"),
}

# A login in a JDBC URL's parameters (pgJDBC's and MariaDB's names, any case, any separator).
_URL_LOGIN = re.compile(r"[?&;](user|password|username)\s*=", re.I)


def url_has_login(url: str) -> bool:
    """Whether a JDBC URL carries a login: the drivers take it over a ``user`` property, so it is
    the node's own account (an administrator's node may keep it there; a user-made node may not)."""
    return bool(_URL_LOGIN.search(url))


def has_login(node: Mapping[str, str]) -> bool:
    """A user, a password, or a login inside the URL: the node says who it connects as."""
    return bool(node.get("user") or node.get("password") or url_has_login(node.get("url") or ""))


# A database server (not SQLite, which has no login to borrow), and a `user=` as its driver reads
# it in the URL: lower case, with a value.
_SERVER_URL = re.compile(r"^jdbc:(postgresql|mysql|mariadb):", re.I)
_URL_USER = re.compile(r"[?&;]user=[^&;]")


def takes_flow_login(node: Mapping[str, str]) -> bool:
    """Whether a database server's node names no user of its own (its `user`, or a `user=` its
    driver reads in the URL). Its connections then log in as a flow says — or, a password alone
    given, as the worker's operating-system user, which a server trusting the workers may take for
    its superuser — so such a login is judged, never taken as given."""
    url = str(node.get("url") or "").strip()
    return bool(_SERVER_URL.match(url)) and not (node.get("user") or _URL_USER.search(url))


def bind(role: str, node: Mapping[str, str], hop: Hop) -> dict[str, str]:
    """The URL and driver, for the source on a flow's first hop (a later hop reads what its parent
    published, as files) and for the writer."""
    if role not in _PREFIX or (role == SOURCE and not hop.first):
        return {}
    return {_PREFIX[role] + key: node[key] for key in ("url", "driver") if node.get(key)}


def credentials(role: str, node: Mapping[str, str]) -> dict[str, str | None]:
    """A node that has a login gives it, whatever the flow says (a reader naming ``postgres`` on a
    server that trusts the workers would be its superuser): its user and password, None for the
    half it has not. A node without one leaves the flow's own login standing (empty)."""
    if role not in LOGIN_KEYS or not has_login(node):
        return {}
    user_key, password_key = LOGIN_KEYS[role]
    return {user_key: node.get("user") or None, password_key: node.get("password") or None}


KIND = NodeKind(
    name="jdbc",
    fields=FIELDS,
    bind=bind,
    credentials=credentials,
    source_class=SOURCE_CLASS,
    writer_format=WRITER_FORMAT,
    table_key="writer.jdbc.table",
    # the wrapped key comes with the password
    user_properties=("url", "driver", "user", "password", "encrypt.wrapped.key"),
)
