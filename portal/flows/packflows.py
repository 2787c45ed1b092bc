"""Flows that use a pack's templates, re-checked whenever the pack changes
(templatepacks.signals, connected in FlowsConfig.ready), so a flow whose
owner lost access (or whose template vanished) is flagged FAILED with a clear
message and will not run."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django.dispatch import receiver

from portal.flows.compiler.record import set_compilation
from portal.flows.models import FlowConfig
from portal.templatepacks.resolution import validate_template_uris_for
from portal.templatepacks.signals import template_pack_changed

logger = logging.getLogger(__name__)
ACCESS_PREFIX = "Template access: "


def flows_using_pack(pack_name: str, paths: Iterable[str]) -> QuerySet[FlowConfig]:
    """Flows naming the pack (pack://<name>/…) or a path it holds (FS:///<path>)."""
    condition = Q(template_uris__contains=f"pack://{pack_name}/")
    for path in set(paths):
        condition |= Q(template_uris__icontains=f"fs:///{path}")
    return FlowConfig.objects.filter(condition).select_related("owner")


@receiver(template_pack_changed, dispatch_uid="flows.recheck_pack_flows")
def recheck_on_pack_change(sender: Any, pack_name: str, paths: Iterable[str], **kwargs: Any) -> None:
    recheck_flows(flows_using_pack(pack_name, paths))


def recheck_flows(flows: Iterable[FlowConfig]) -> list[FlowConfig]:
    """Flag flows that can no longer use their templates; un-flag (back to
    PENDING, for the compiler) flows this check had flagged that now pass.
    Returns the flows flagged."""
    flagged = []
    for flow in flows:
        try:
            validate_template_uris_for(flow.owner, flow.template_uri_list)
        except ValidationError as error:
            message = ACCESS_PREFIX + " ".join(error.message_dict.get("template_uris", error.messages))
            message += " The flow will not run until its owner can read these templates again."
            set_compilation(flow, FlowConfig.Compilation.FAILED, message)
            flagged.append(flow)
            logger.warning("flow %s flagged: %s", flow, message)
        else:
            if flow.compilation_message.startswith(ACCESS_PREFIX):
                set_compilation(
                    flow, FlowConfig.Compilation.PENDING, "Template access restored; to be compiled."
                )
    return flagged
