"""A change-data-capture flow's PostgreSQL replication slot lives and dies with the flow.

The slot and publication (``portal.pipeline.cdc.pg``) are made by the flow's first run on the
source server; while they exist the server keeps its write-ahead log for them. Deleting the flow
drops both, once the deletion has committed, over a connection opened the way the worker opens its
own: the flow's compiled first hop bound to its source node, its secrets decrypted, and the
portal's own databases refused where the connection lands. A server that cannot be reached then
keeps the slot: the log says which slot to drop by hand.

A flow whose position cannot be read on from (a slot the server lost or that was dropped, a binlog
expired, a truncated table) fails its runs until its owner asks for a new snapshot
(:func:`resnapshot`): the captured tables' positions are cleared, audited like any watermark reset,
and the next run drops a lost slot, makes a new one and reads the tables whole again.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import receiver

from portal.accounts.access import Principal
from portal.flows.signals import flow_catalog_changed
from portal.keys.services import decrypt_properties
from portal.orchestration.control.jobspecs import bind_hop
from portal.orchestration.models import DatasetState
from portal.orchestration.state import statestore
from portal.pipeline.cdc import mysql as cdc_mysql
from portal.pipeline.cdc import pg as cdc_pg
from portal.pipeline.jobspec import with_node_credentials
from portal.pipeline.properties import Properties
from portal.topology.policy import bounds_named
from portal.topology.reach import portal_landings

logger = logging.getLogger(__name__)

CDC_SOURCE = "portal.pipeline.sources.cdc.CdcSource"


def capture_of(flow: Any) -> tuple[str, dict[str, str]] | None:
    """The flow's slot name and its first hop's properties, when that hop captures changes from
    PostgreSQL."""
    return _first_capture(flow, ("jdbc:postgresql:",))


def binlog_capture_of(flow: Any) -> tuple[str, dict[str, str]] | None:
    """Like :func:`capture_of` for a flow whose first hop reads a MariaDB binlog (no slot: the name
    is the one its stream announces itself by)."""
    return _first_capture(flow, ("jdbc:mariadb:", "jdbc:mysql:"))


def _first_capture(flow: Any, schemes: tuple[str, ...]) -> tuple[str, dict[str, str]] | None:
    """The first hop bound to its nodes with the login the worker's JobSpec gives it (the node's
    user and password, still encrypted, over the flow's own): whoever reads these properties — the
    slot card, the lag monitor, the slot's drop — reads the login the runs use."""
    dag = getattr(getattr(flow, "compiled_dag", None), "dag", None) or {}
    for plan in dag.get("jobs", []):
        if plan.get("parents"):
            continue
        props = with_node_credentials(bind_hop(plan, [], final=True))
        url = props.get("source.jdbc.url") or ""
        if props.get("source.class") == CDC_SOURCE and url.startswith(schemes):
            return cdc_pg.slot_name(flow.pk, flow.flow_group, flow.flow_name), props
    return None


def capturing_hops(flow: Any) -> list[tuple[str, list[str]]]:
    """The job name and captured tables of each of the flow's first hops that read the cdc source
    (on PostgreSQL or MariaDB): one per destination of the flow, each with its own positions."""
    dag = getattr(getattr(flow, "compiled_dag", None), "dag", None) or {}
    found = []
    for plan in dag.get("jobs", []):
        props = plan.get("properties") or {}
        if not plan.get("parents") and props.get("source.class") == CDC_SOURCE:
            tables = Properties(props).get_list("source.cdc.tables")
            found.append((str(plan["jobName"]), list(dict.fromkeys(tables))))
    return found


class NotCapturing(ValueError):
    pass


def resnapshot(flow: Any, *, user: Principal) -> list[str]:
    """Clear the positions of the flow's captured tables so that its next run reads them whole from
    a new snapshot; the tables whose position was cleared. Refused (``PendingCommitSteps``) while a
    table has unfinished commit steps: they would set the position back."""
    hops = capturing_hops(flow)
    if not hops:
        raise NotCapturing(f"flow {flow} does not capture changes (source.class {CDC_SOURCE})")
    cleared = []
    with transaction.atomic():  # every destination's positions: the slot may then be made anew
        for job_name, tables in hops:
            states = DatasetState.objects.filter(flow_id=flow.pk, job_name=job_name, dataset_urn__in=tables)
            for state in states.exclude(watermark="").order_by("dataset_urn"):
                statestore.reset_watermark(
                    state,
                    watermark="",
                    reason="a new snapshot was asked for: the next run reads the table whole again",
                    changed_by=getattr(user, "username", "") or str(user),
                )
                if state.dataset_urn not in cleared:
                    cleared.append(state.dataset_urn)
    logger.info("flow %s: new snapshot asked by %s; positions cleared: %s", flow, user, ", ".join(cleared))
    return cleared


def _as_the_worker_reads(props: dict[str, str]) -> dict[str, str]:
    """The hop's properties decrypted, with its JDBC node's login (:func:`_first_capture` gives
    it already; a caller's own properties get it here) — as the worker's JobSpec reads them."""
    return with_node_credentials(decrypt_properties(props))


def source_connection(props: dict[str, str], flow_label: str, timeout: int | None = None) -> Any:
    """A connection to a cdc flow's source server as the flow's owner reaches it (its
    credentials decrypted here, the portal's own database refused where the connection lands)."""
    clear = _as_the_worker_reads(props)
    return cdc_pg.connect(
        clear["source.jdbc.url"],
        clear.get("source.conn.username"),
        clear.get("source.conn.password"),
        what=f"flow {flow_label}",
        portal=portal_landings(),
        timeout=timeout,
        bounds=bounds_named(clear.get("flowport.hop.source")),
    )


def binlog_connection(props: dict[str, str], flow_label: str, timeout: int | None = None) -> Any:
    """A connection to a binlog flow's MariaDB server, reached as :func:`source_connection` reaches
    a PostgreSQL one (credentials decrypted here, the portal's own database refused)."""
    clear = _as_the_worker_reads(props)
    server = cdc_mysql.server_of(
        clear["source.jdbc.url"], clear.get("source.conn.username"), clear.get("source.conn.password")
    )
    tables = Properties(clear).get_list("source.cdc.tables")
    return cdc_mysql.connect(
        server,
        tables,
        what=f"flow {flow_label}",
        portal=portal_landings(),
        timeout=timeout,
        bounds=bounds_named(clear.get("flowport.hop.source")),
    )


def drop_capture(name: str, props: dict[str, str], flow_label: str) -> list[str]:
    """Drop the slot and publication ``name`` on the flow's source server; what was dropped."""
    try:
        with source_connection(props, flow_label) as conn:
            dropped = cdc_pg.drop(conn, name)
    except Exception as error:  # the flow is gone either way: say what is left behind
        logger.warning(
            "flow %s deleted; its replication slot %s was NOT dropped: %s", flow_label, name, error
        )
        return []
    logger.info("flow %s deleted; dropped %s", flow_label, ", ".join(dropped) or "nothing (none existed)")
    return dropped


@receiver(flow_catalog_changed, dispatch_uid="orchestration.cdc_slot_on_delete")
def drop_on_delete(sender: Any, action: str, flow: Any, **kwargs: Any) -> None:
    if action != "delete":
        return
    found = capture_of(flow)
    if found is not None:
        name, props = found
        label = str(flow)
        transaction.on_commit(lambda: drop_capture(name, props, label))
