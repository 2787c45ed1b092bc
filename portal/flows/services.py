"""The flow catalog (the seed's FlowCatalog + FlowStore): the only way flows
are created, changed and removed, for pages and API alike."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.flows import groups
from portal.flows.models import FlowConfig
from portal.flows.signals import flow_catalog_changed
from portal.templatepacks.services import validate_template_uris_for

logger = logging.getLogger(__name__)

EDITABLE_FIELDS = (
    "description",
    "schedule",
    "run_immediately",
    "template_uris",
    "properties",
    "source",
    "destinations",
    "owning_group",
    "schedule_given",
)
KEY_FIELDS = ("flow_group", "flow_name")


class FlowAlreadyExists(Exception):
    def __init__(self, flow_group: str, flow_name: str) -> None:
        super().__init__(f"Flow {flow_group}/{flow_name} already exists.")


class FlowKeyChange(Exception):
    """flowGroup and flowName are the flow's identity; they never change."""

    def __init__(self, field: str) -> None:
        self.field = field
        super().__init__(f"{field} cannot be changed; create a new flow instead.")


def create_flow(*, owner: AbstractBaseUser, data: dict[str, Any]) -> FlowConfig:
    flow = FlowConfig(owner=owner, **{k: v for k, v in data.items() if k in (*KEY_FIELDS, *EDITABLE_FIELDS)})
    if data.get("paused"):  # created switched off, as Airflow's dags_are_paused_at_creation
        flow.paused, flow.paused_at, flow.paused_by = True, timezone.now(), owner.get_username()
    flow.full_clean(validate_unique=False, validate_constraints=False)
    validate_template_uris_for(flow.owner, flow.template_uri_list)
    groups.check(owner, flow.flow_group)
    try:
        with transaction.atomic():
            groups.claim(owner, flow.flow_group)
            flow.save()
            flow_catalog_changed.send(sender=FlowConfig, action="add", flow=flow)
    except IntegrityError:
        if FlowConfig.objects.filter(flow_group=flow.flow_group, flow_name=flow.flow_name).exists():
            raise FlowAlreadyExists(flow.flow_group, flow.flow_name) from None
        raise
    logger.info("flow %s created by %s", flow, owner)
    return FlowConfig.objects.get(pk=flow.pk)


def set_paused(flow: FlowConfig, paused: bool, *, by: str = "") -> FlowConfig:
    """Pause or resume a flow's schedule without editing it.

    Only the pause fields change (no catalog event, no recompile). The
    scheduler leaves a paused flow's cursor where it stopped, so on resume the
    ticks that came due meanwhile are "missed" ticks and follow the flow's
    catch-up policy like any other (orchestration.scheduler)."""
    paused = bool(paused)
    if flow.paused != paused:
        flow.paused = paused
        flow.paused_at = timezone.now() if paused else None
        flow.paused_by = by if paused else ""
        FlowConfig.objects.filter(pk=flow.pk).update(
            paused=flow.paused, paused_at=flow.paused_at, paused_by=flow.paused_by
        )
        logger.info("flow %s %s by %s", flow, "paused" if paused else "resumed", by or "?")
    return flow


def update_flow(flow: FlowConfig, *, data: dict[str, Any], by: str = "") -> FlowConfig:
    """Apply the given fields (a PUT sends all, a PATCH some); `paused` goes
    through set_paused, so a PATCH of it alone neither saves nor recompiles."""
    data = dict(data)
    if "paused" in data:
        set_paused(flow, data.pop("paused"), by=by)
        if not data:
            return FlowConfig.objects.get(pk=flow.pk)
    for field in KEY_FIELDS:
        if field in data and data[field] != getattr(flow, field):
            raise FlowKeyChange(field)
    for field in EDITABLE_FIELDS:
        if field in data:
            setattr(flow, field, data[field])
    flow.full_clean(validate_unique=False, validate_constraints=False)
    validate_template_uris_for(flow.owner, flow.template_uri_list)
    with transaction.atomic():
        flow.save()
        flow_catalog_changed.send(sender=FlowConfig, action="update", flow=flow)
    logger.info("flow %s updated", flow)
    return FlowConfig.objects.get(pk=flow.pk)


def delete_flow(flow: FlowConfig) -> None:
    with transaction.atomic():
        flow_catalog_changed.send(sender=FlowConfig, action="delete", flow=flow)
        flow.delete()
    logger.info("flow %s deleted", flow)


def set_compilation(flow: FlowConfig, status: str, message: str) -> None:
    """Record the compiler's verdict without firing catalog events again."""
    FlowConfig.objects.filter(pk=flow.pk).update(compilation_status=status, compilation_message=message)
    flow.compilation_status, flow.compilation_message = status, message
