"""Tables inside a shared destination have owners (`DestinationTable`).

A write grant on a JDBC or Iceberg node lets a user's flows write into the node, not into every
table in it: a flow writes into a table only if the flow's owner owns that table. The first flow
to create a table becomes its owner's (recorded when the run is about to create it; two flows
creating it at once are decided by the unique constraint, the loser refused). A table that was
there before any flow made it belongs to the node's owners (its owner grants, users or groups).
Staff may write anywhere and assign a table to someone (the admin, or the API).

Decided twice, like the grants: at save when the flow names its table (``writer.jdbc.table``,
``writer.iceberg.namespace``/``writer.iceberg.table`` without ``{table}``), from the records
alone; and on the worker before a dataset's commit steps are stored, on the table each step
actually writes as its database names it (append, overwrite, merge and history alike: they are
all one publish step). Files destinations have no such tables: a flow writes only into its own
``<node>/<flowGroup>/<flowName>`` folder (the worker's guard).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from portal.accounts.access import Principal, is_account
from portal.pipeline import nodekinds
from portal.pipeline.dialects import MYSQL, SQLITE, dialect_for
from portal.pipeline.errors import ConfigError
from portal.pipeline.landing import url_database
from portal.topology.models import DataNode, DataNodeGrant, DestinationTable

# The kinds whose nodes hold tables a flow may own.
KINDS = tuple(name for name, kind in nodekinds.KINDS.items() if kind.table_key)


def is_staff(user: Principal) -> bool:
    return bool(user is not None and (user.is_staff or user.is_superuser))


def owns_node(user: Principal, node: DataNode) -> bool:
    """An owner grant on the node, to the user or one of their groups."""
    if not is_account(user):
        return False
    owners = DataNodeGrant.objects.filter(node=node, role=DataNodeGrant.Role.OWNER)
    return owners.filter(user=user).exists() or owners.filter(group__in=user.groups.all()).exists()


def _owner_words(record: DestinationTable | None) -> str:
    if record is not None and record.owner is not None:
        return f"user {record.owner.username!r}"
    return "the node's owners"


def refusal(user: Principal | None, node: DataNode, name: str, *, exists: bool | None) -> str | None:
    """Why ``user``'s flow may not write into table ``name`` of ``node``, or None. ``exists``:
    whether the table is there (None at save, where it is not known: only a record refuses)."""
    if user is None or is_staff(user) or node.kind not in KINDS:
        return None
    record = DestinationTable.objects.select_related("owner").filter(node=node, name=name).first()
    if record is not None and record.owner_id == user.pk:
        return None
    if record is None and (exists is not True or owns_node(user, node)):
        return None
    if record is not None and record.owner_id is None and owns_node(user, node):
        return None
    return (
        f"table {name} of data node {node.name!r} belongs to {_owner_words(record)}, not to the "
        f"flow's owner {user.username!r} (a flow writes only into tables its owner owns; an "
        "administrator can assign it)"
    )


def claim(user: Principal | None, node: DataNode, name: str, *, exists: bool, flow: str) -> str | None:
    """Before a run writes table ``name``: a table about to be created becomes the flow owner's
    (the first claim wins); then :func:`refusal` decides."""
    if is_account(user) and not exists and node.kind in KINDS:
        try:
            with transaction.atomic():
                DestinationTable.objects.get_or_create(
                    node=node, name=name, defaults={"owner": user, "flow": flow}
                )
        except IntegrityError:  # another flow claimed it between our look and our insert
            pass
    return refusal(user, node, name, exists=exists)


def assign(node: DataNode, name: str, owner: User | None) -> DestinationTable:
    """Staff's decision: ``owner`` (None: the node's owners) owns table ``name`` of ``node``."""
    with transaction.atomic():
        record, _ = DestinationTable.objects.select_for_update().get_or_create(node=node, name=name)
        record.owner = owner
        record.save(update_fields=["owner"])
    return record


def named_table(kind: str, props: dict[str, str], flow_group: str) -> str | None:
    """The table a flow names at save, as the run will record it, or None when the run decides
    it (a ``{table}`` template, or no name). PostgreSQL's unqualified names are taken to be in
    ``public`` and MySQL's in the URL's database (the run asks the database itself)."""
    if kind == "iceberg":
        table = props.get("writer.iceberg.table") or ""
        if not table or "{" in table:
            return None
        return f"{props.get('writer.iceberg.namespace') or flow_group}.{table}"
    table = (props.get("writer.jdbc.table") or "").strip()
    if not table or "{" in table:
        return None
    url = props.get("writer.jdbc.url") or props.get("flowport.hop.destination.url") or ""
    parts = [p.strip('"`') for p in table.split(".")]
    try:
        dialect = dialect_for(url, "writer.jdbc.url")
    except ConfigError:
        dialect = None  # refused elsewhere, by the rule that knows why
    if dialect is SQLITE:
        return parts[-1]
    if len(parts) > 1:
        return ".".join(parts[-2:])
    if dialect is MYSQL:  # the URL's database, as the driver reads it; none named: the run asks
        database = url_database(url)
        return f"{database}.{parts[0]}" if database else None
    return f"public.{parts[0]}"


def save_refusal(user: Principal, node_name: str, props: dict[str, str], flow_group: str) -> str | None:
    """At save: the table the flow names is another's (by the records). The compiled hop names its
    destination's kind, so a save into folders reads no node."""
    kind = props.get("flowport.hop.destination.kind", "")
    if kind not in KINDS:
        return None
    name = named_table(kind, props, flow_group)
    if name is None:
        return None
    node = DataNode.objects.filter(name=node_name).first()
    if node is None or node.kind != kind:
        return None
    reason = refusal(user, node, name, exists=None)
    key = nodekinds.table_key(node.kind)
    return f"{key}: {reason}" if reason else None


def step_refusal(user: Principal | None, node_name: str, step: Any, flow: str) -> str | None:
    """On the worker, before a dataset's commit steps are stored: the table the step writes."""
    identity = getattr(step, "target_identity", None)
    if identity is None:
        return None
    node = DataNode.objects.filter(name=node_name).first()
    if node is None or node.kind not in KINDS:
        return None
    name, exists = identity()
    return claim(user, node, name, exists=exists, flow=flow)
