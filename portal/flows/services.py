"""The flow catalog (the seed's FlowCatalog + FlowStore): the only way flows
are created, changed and removed, for pages and API alike."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

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


def update_flow(flow: FlowConfig, *, data: dict[str, Any]) -> FlowConfig:
    """Apply the given fields (a PUT sends all, a PATCH some)."""
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
