"""The connection fields of each data node kind, for the node form: which
node property each field is, and which pipeline keys of the property schema
(`portal.pipeline.propertyrules`, all node-owned) the compiler binds from it, so the
form's help says where a value ends up. The kinds the pipeline reads and writes
declare their fields and binding in `portal.pipeline.nodekinds`; this only words them
for the form. A key the schema calls a secret (`crypto.secretnames.names_secret`) is a
password field whose value must be ENC(...).
And what of a node's connection the pages and API show to whom
(`CredentialView`): everything to staff and the node's owners, credentials
masked to everyone else."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from portal.accounts.access import Principal
from portal.crypto.secretnames import names_secret
from portal.pipeline import nodekinds, propertyrules
from portal.pipeline.nodekinds import NodeKind
from portal.topology import credentials, reach
from portal.topology.models import DataNode, DataNodeGrant


@dataclass(frozen=True)
class NodeField:
    key: str  # the node property
    label: str
    help: str
    binds: tuple[str, ...] = ()  # pipeline keys set from it (its kind's bind, pipeline.nodekinds)
    required: bool = False
    placeholder: str = ""

    @property
    def secret(self) -> bool:
        return names_secret(self.key)

    @property
    def help_text(self) -> str:
        parts = [self.help]
        if self.binds:
            parts.append("Sets " + ", ".join(self.binds) + ".")
        if self.secret:
            parts.append("Encrypted before it is stored; leave it empty to keep the stored one.")
        return " ".join(parts)


def _of_kind(kind: NodeKind) -> tuple[NodeField, ...]:
    """A pipeline kind's fields as the form shows them, each saying the keys its kind binds from
    it (`portal.pipeline.nodekinds`), so the help cannot drift from what is bound."""
    return tuple(
        NodeField(
            field.key,
            field.label,
            field.help,
            binds=nodekinds.binds(kind.name, field.key),
            required=field.required,
            placeholder=field.placeholder,
        )
        for field in kind.fields
    )


FIELDS: dict[str, tuple[NodeField, ...]] = {
    **{name: _of_kind(kind) for name, kind in nodekinds.KINDS.items()},
    # Kinds the pipeline neither reads nor writes: their fields only describe them.
    "hive": (
        NodeField(
            "metastore.uris",
            "Metastore URIs",
            "The Hive metastore (thrift://host:9083).",
            placeholder="thrift://metastore:9083",
        ),
    ),
    "kafka": (
        NodeField(
            "bootstrap.servers",
            "Bootstrap servers",
            "host:port[,host:port].",
            required=True,
            placeholder="kafka1:9092,kafka2:9092",
        ),
        NodeField("sasl.username", "SASL username", "Empty without SASL."),
        NodeField("sasl.password", "SASL password", "Empty without SASL."),
    ),
    "other": (),
}


def fields_of(kind: str) -> tuple[NodeField, ...]:
    return FIELDS.get(kind, ())


def node_owned(field: NodeField) -> bool:
    """Every pipeline key a node field binds belongs to the portal, never to a flow."""
    return all(propertyrules.owner_of(key) == propertyrules.NODE for key in field.binds)


_ENCRYPTED = re.compile(r"^ENC\(.+\)\Z", re.S)


def masked_properties(properties: dict[str, Any]) -> dict[str, Any]:
    """A node's connection as shown to someone who is not its owner: secret-named
    values and wrapped keys hidden (even ENC(...), which names whose key made it),
    the account it logs in as too (half of a credential: a reader could try it
    elsewhere), and credentials inside other values (a URL's `user:pass@`,
    `password=`, `user=`) masked."""
    shown: dict[str, Any] = {}
    for key, value in properties.items():
        if not isinstance(value, str):
            shown[key] = value
        elif names_secret(key) or key.endswith("encrypt.wrapped.key"):
            shown[key] = "ENC(…)" if _ENCRYPTED.match(value) else credentials.MASK
        elif credentials.names_account(key):
            shown[key] = credentials.MASK if value else value
        else:
            shown[key] = credentials.masked(value, accounts=True)
    return shown


class CredentialView:
    """What one user sees of data nodes' connections: staff and a node's owners
    (an owner grant to them or to one of their groups) see it whole; every other
    user, granted or not, sees it with its credentials masked. The owned nodes are
    read once, on first need, so a list of nodes costs one query."""

    def __init__(self, user: Principal | None) -> None:
        self.user = user
        self._owned: set[int] | None = None

    def whole(self, node: DataNode) -> bool:
        user = self.user
        if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
            return False
        if user.is_staff or user.is_superuser:
            return True
        if self._owned is None:
            self._owned = set(
                DataNodeGrant.objects.filter(role=DataNodeGrant.Role.OWNER)
                .filter(Q(user=user) | Q(group__in=user.groups.all()))
                .values_list("node_id", flat=True)
            )
        return node.pk in self._owned

    def properties(self, node: DataNode) -> dict[str, Any]:
        stored = dict(node.properties or {})
        return stored if self.whole(node) else masked_properties(stored)

    def page_properties(self, node: DataNode) -> dict[str, Any]:
        """As :meth:`properties`, for a page a person reads: an owner's ENC(...) values and wrapped
        key are said in words, not shown as blobs (the API keeps them whole, to send back); the
        server's folder a files or Iceberg node lives in is staff's to see (the server's layout):
        everyone else reads paths relative to the node's root, as its flows and outputs name them."""
        return {
            key: root_shown(self.user, node.kind, key, _in_words(key, value))
            for key, value in self.properties(node).items()
        }


SERVER_ROOT = "(a folder on the portal's server: its path is shown to staff; flows name paths inside it)"


def root_shown(user: Principal | None, kind: str, key: str, value: Any) -> Any:
    """`value` of a `kind` node's property `key` as `user` reads it on a page or in a compiled
    job: the node's root, when it is a folder on the portal's server, is staff's to see (the
    server's layout); anyone else reads SERVER_ROOT. Other properties are returned as they are."""
    root = nodekinds.root_key(kind)
    if getattr(user, "is_staff", False) or not root or key != root or not _on_the_server(value):
        return value
    return SERVER_ROOT


def without_root(user: Principal, node: DataNode, text: str) -> str:
    """`text` (a connection test's or discovery's message) with the node's server folder said as
    "the node's root" for anyone but staff."""
    key = nodekinds.root_key(node.kind)
    root = (node.properties or {}).get(key) if key else None
    # A relative root is on the server too: under FLOWPORT_DATA_DIR, which messages spell out.
    relative = isinstance(root, str) and bool(root) and "://" not in root and not _on_the_server(root)
    if getattr(user, "is_staff", False) or not (_on_the_server(root) or relative):
        return text
    local = reach.node_root(str(root))
    for spelling in sorted({local.rstrip("/"), os.path.realpath(local).rstrip("/")}, key=len, reverse=True):
        if len(spelling) > 1:
            text = text.replace(spelling, "the node's root")
    return text[:1].upper() + text[1:] if text.startswith("the node's root") else text


def _on_the_server(value: Any) -> bool:
    """A local path (``/srv/lake``, ``file:/srv/lake``), not an object store's address (``s3a://…``)."""
    return isinstance(value, str) and (value.startswith("/") or value.startswith("file:"))


def _in_words(key: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if key.endswith("encrypt.wrapped.key") and value and value != credentials.MASK:
        return "(the owner's key, wrapped by the master key)"
    if _ENCRYPTED.match(value):
        return "ENC(…) stored encrypted"
    return value
