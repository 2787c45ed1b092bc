"""The flow catalog (GaaS's FlowCatalog + FlowStore): the only way flows
are created, changed and removed, for pages and API alike."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.accounts.access import Principal
from portal.crypto.encrypted import WRAPPED_KEY_PROPERTY, redact
from portal.flows import groups
from portal.flows import policies as run_policies
from portal.flows.attributes import supplied_by_compiler
from portal.flows.compiler import CompiledFlow, compile_flow, record
from portal.flows.compiler.templates import (
    Resolution,
    declared_encrypted_attributes,
    missing_attributes,
    required_message,
    resolve_flow_templates,
)
from portal.flows.models import DESTINATION_PROPERTY, SOURCE_PROPERTY, FlowConfig
from portal.flows.schedules import to_unix_cron
from portal.flows.secrets import validate_flow_secrets, with_column_rules_key
from portal.flows.signals import flow_catalog_changed, flow_pause_changed
from portal.flows.tablesets import database_reach_problems, table_pattern_problems
from portal.flows.versions import services as versions
from portal.pipeline.jobcheck import job_property_problems
from portal.pipeline.propertyrules import closest_known_key
from portal.quotas import services as quotas
from portal.templatepacks.resolution import TemplateLoader
from portal.templatepacks.services import validate_template_uris_for
from portal.topology.models import DataNode

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


REQUIRED_ATTRIBUTE = "required_attribute"


def _merge(errors: dict[str, list[Any]], error: ValidationError, field: str = "__all__") -> None:
    for name, items in (
        error.error_dict if hasattr(error, "error_dict") else {field: error.error_list}
    ).items():
        errors.setdefault(name, []).extend(items)


def _node_errors(flow: FlowConfig, errors: dict[str, list[Any]]) -> dict[str, str]:
    """No source, no destination or a name that is no data node: the compiler could find no path.
    Returns the kind of each named node that exists."""
    names = [flow.source, *flow.destinations] if flow.source else list(flow.destinations)
    known = dict(DataNode.objects.filter(name__in=names).values_list("name", "kind"))
    if not flow.source:
        errors.setdefault("source", []).append(ValidationError("Choose the data node the data is read from."))
    elif flow.source not in known:
        errors.setdefault("source", []).append(ValidationError(f"{flow.source!r} is not a data node."))
    if not flow.destinations:
        errors.setdefault("destinations", []).append(
            ValidationError("Choose at least one destination data node.")
        )
    for name in flow.destinations:
        if name not in known:
            errors.setdefault("destinations", []).append(ValidationError(f"{name!r} is not a data node."))
    return known


@dataclass
class ValidatedFlow:
    """What validate_flow checked: the flow's templates as resolved for its owner and the plan
    they compile to (COMPILED or PENDING). The save stores that plan and a preview shows it, so
    neither is made twice. `compiled` carries what the table patterns match now
    (portal.flows.tablesets), which the stored plan leaves out."""

    resolution: Resolution
    compiled: CompiledFlow


def validate_flow(flow: FlowConfig, *, loader: Any = None) -> ValidatedFlow:  # noqa: C901
    """Everything a save refuses, checked before anything is written, for the form, the API
    and Rest.li alike: the model's field rules, the data nodes, the templates (readable by the
    owner, their required attributes set), the secrets (keys app) and every property value and
    required property the pipeline would refuse (portal.pipeline.propertyrules), job by job of the
    compiled flow. A flow that can only wait (no path in today's topology) is accepted, PENDING.

    ValidationError({field: [...]}) under model field names; a missing required template
    attribute has code "required_attribute" and params {"name": ...} so the form can put it
    beside the attribute's input. One TemplateLoader (`loader`, else the owner's) reads each
    template once for the whole check."""
    errors: dict[str, list[Any]] = {}
    try:
        flow.full_clean(validate_unique=False, validate_constraints=False)
    except ValidationError as error:
        _merge(errors, error)
    owner = flow.owner if flow.owner_id else None
    loader = loader if loader is not None else TemplateLoader(owner)
    kinds = _node_errors(flow, errors) if "source" not in errors and "destinations" not in errors else {}
    if "template_uris" not in errors:
        try:
            validate_template_uris_for(owner, flow.template_uri_list, loader)
        except ValidationError as error:
            _merge(errors, error, "template_uris")
    resolution: Resolution | None = None
    if "properties" not in errors:
        if "template_uris" not in errors:
            # Independent of the nodes and the schedule, so reported with their problems.
            resolution = resolve_flow_templates(flow, owner, loader)
            declared = set(resolution.encrypted_attributes)
        else:  # what the readable templates declare still holds
            declared = declared_encrypted_attributes(flow, owner, loader)
        try:
            validate_flow_secrets(flow, declared)
        except ValidationError as error:
            _merge(errors, error, "properties")
    if "properties" not in errors and owner is not None:
        try:
            quotas.validate_flow(quotas.tenant_for(owner, flow.owning_group), flow.properties or {})
        except ValidationError as error:
            errors["properties"] = [f"{key}: {' '.join(msgs)}" for key, msgs in error.message_dict.items()]
    if resolution is None or "properties" in errors:
        raise ValidationError(errors)
    for name in missing_attributes(resolution, resolution.properties, set_later=supplied_by_compiler):
        errors.setdefault("properties", []).append(
            ValidationError(required_message(name), code=REQUIRED_ATTRIBUTE, params={"name": name})
        )
    if errors:
        raise ValidationError(errors)
    compiled = compile_flow(flow, user=owner, loader=loader, resolution=resolution)
    problems = compile_problems(compiled)
    if not compiled.jobs:
        # No path yet (PENDING): the first hop's properties are still known, and judged.
        hop = {"flowport.hop.source.kind": kinds.get(flow.source, "")}
        hop["flowport.hop.destination.kind"] = kinds.get(flow.destinations[0], "")
        problems += job_property_problems({**resolution.properties, **hop})
    for message in dict.fromkeys(problems):
        errors.setdefault(_field_of(message, flow), []).append(ValidationError(message))
    if errors:
        raise ValidationError(errors)
    return ValidatedFlow(resolution, compiled)


# Keys the flow catalog reads itself (run policies, Gobblin's endpoint names, the wrapped key).
FLOW_KEYS = frozenset(
    {
        run_policies.ALLOW_CONCURRENT,
        run_policies.CATCH_UP,
        run_policies.RETRY_COUNT,
        run_policies.RETRY_BACKOFF,
        run_policies.RETENTION_DAYS,
        *run_policies.FLOW_SLA,
        *run_policies.JOB_START_SLA,
        SOURCE_PROPERTY,
        DESTINATION_PROPERTY,
        WRAPPED_KEY_PROPERTY,
        quotas.PRIORITY,
    }
)


def property_warnings(properties: dict[str, Any]) -> list[str]:
    """Keys that look like a misspelling of a known one (`source.file.fromat`). Not errors:
    a custom key is allowed (a template may read it), so the flow is saved and the warning
    shown with it, on the page after the save and in the API's answer."""
    warnings = []
    for key in sorted(properties):
        if isinstance(key, str) and key.startswith(quotas.SPARK_CONF):
            warnings.append(
                f"Property {key!r} is not applied: a job's Spark settings are its executor's (staff "
                f"set them); a flow asks for cores and memory with {quotas.SPARK_CORES!r} and "
                f"{quotas.SPARK_MEMORY!r}. It was saved as typed, and still may not pass the quota."
            )
            continue
        closest = closest_known_key(key, FLOW_KEYS) if isinstance(key, str) else None
        if closest:
            warnings.append(
                f"Property {key!r} is no key Flowport knows; did you mean {closest!r}? "
                "It was saved as typed (custom keys are allowed)."
            )
    return warnings


def compile_problems(compiled: CompiledFlow) -> list[str]:
    """What makes a compiled flow unable to run: the compiler's errors and, job by job, what the
    pipeline's property schema refuses. The compile preview shows the same list."""
    problems = [*compiled.errors]
    names = {name for job in compiled.jobs for name in (job.source_node, job.destination_node)}
    nodes = DataNode.objects.in_bulk(list(names), field_name="name") if names else {}
    for job in compiled.jobs:
        problems += job.errors
        problems += job_property_problems(job.properties, first_hop=not job.parents)
        problems += table_pattern_problems(job)  # whole schemas: a pattern must match a table now
        problems += database_reach_problems(job, nodes)  # a MySQL/MariaDB node: its own database only
    return problems


def preview(flow: FlowConfig, *, user: Principal) -> CompiledFlow:
    """The API's dry-run compile (nothing is saved), answering as the save would: validate_flow's
    own compile for a flow it accepts (COMPILED or PENDING), else FAILED with the save's messages
    beside the jobs the flow would make. The form's preview is the same validate_flow, run by the
    form, so page and API never disagree on what is "compiled"."""
    try:
        return validate_flow(flow).compiled
    except ValidationError as error:
        refusal = error.messages
    compiled = compile_flow(flow, user=user)
    for job in compiled.jobs:  # what each table pattern matches now, as the save's check showed
        table_pattern_problems(job)
    known = {*compiled.errors, *(error for job in compiled.jobs for error in job.errors)}
    compiled.errors += [message for message in dict.fromkeys(refusal) if message not in known]
    for job in compiled.jobs:  # a refused flow may carry a secret in clear: never echoed back
        job.properties = redact(job.properties)
    return compiled


def _field_of(message: str, flow: FlowConfig) -> str:
    """The form field a compile problem is about (a grant names the node, a template its URI)."""
    if "may not read from data node" in message:
        return "source"
    if "may not write to data node" in message:
        return "destinations"
    if any(uri in message for uri in flow.template_uri_list):
        return "template_uris"
    return "properties"


def _keep_schedule_as_given(data: dict[str, Any], flow: FlowConfig | None = None) -> dict[str, Any]:
    """The schedule text as it was written goes beside its unix form, whichever path wrote it
    (form, API, Rest.li): Gobblin's clients read a Quartz schedule back as they would have sent
    it. A write that sends the unix form of the schedule given before (the form or a GET of
    /api echoed back by an edit that left the schedule alone) keeps the text given before."""
    if "schedule" not in data or "schedule_given" in data:
        return data
    text = " ".join(str(data["schedule"] or "").split())
    if flow is not None and flow.schedule_given and text:
        try:
            unchanged = to_unix_cron(text) == text == to_unix_cron(flow.schedule_given)
        except ValidationError:  # a bad schedule: the save names it
            unchanged = False
        if unchanged:
            return data
    return {**data, "schedule_given": text}


def create_flow(*, owner: User, data: dict[str, Any]) -> FlowConfig:
    data = _keep_schedule_as_given(data)
    flow = FlowConfig(owner=owner, **{k: v for k, v in data.items() if k in (*KEY_FIELDS, *EDITABLE_FIELDS)})
    if data.get("paused"):  # created switched off, as Airflow's dags_are_paused_at_creation
        flow.paused, flow.paused_at, flow.paused_by = True, timezone.now(), owner.get_username()
    groups.check(owner, flow.flow_group)  # who may create here comes before what is created
    flow.properties = with_column_rules_key(owner, flow.properties or {})
    checked = validate_flow(flow)
    try:
        with transaction.atomic():
            groups.claim(owner, flow.flow_group)
            flow.save()
            versions.record(flow, by=owner.get_username())
            record.store(flow, checked.compiled)
            flow_catalog_changed.send(sender=FlowConfig, action="add", flow=flow)
    except IntegrityError:
        if FlowConfig.objects.filter(flow_group=flow.flow_group, flow_name=flow.flow_name).exists():
            raise FlowAlreadyExists(flow.flow_group, flow.flow_name) from None
        raise
    logger.info("flow %s created by %s", flow, owner)
    return FlowConfig.objects.get(pk=flow.pk)


def set_paused(flow: FlowConfig, paused: bool, *, by: str = "") -> FlowConfig:
    """Pause or resume a flow's schedule without editing it.

    Only the pause fields change (no catalog event, no recompile; the
    scheduler hears of it to withdraw the ticks it wrote ahead). The
    scheduler leaves a paused flow's cursor where it stopped, so on resume the
    ticks that came due meanwhile are "missed" ticks and follow the flow's
    catch-up policy like any other (orchestration.control.scheduler)."""
    paused = bool(paused)
    if flow.paused != paused:
        flow.paused = paused
        flow.paused_at = timezone.now() if paused else None
        flow.paused_by = by if paused else ""
        with transaction.atomic():
            FlowConfig.objects.filter(pk=flow.pk).update(
                paused=flow.paused, paused_at=flow.paused_at, paused_by=flow.paused_by
            )
            flow_pause_changed.send(sender=FlowConfig, flow=flow, paused=flow.paused)
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
    data = _keep_schedule_as_given(data, flow)
    stored = dict(flow.properties or {})
    for field in EDITABLE_FIELDS:
        if field in data:
            setattr(flow, field, data[field])
    flow.properties = with_column_rules_key(flow.owner, flow.properties or {}, stored)
    checked = validate_flow(flow)
    with transaction.atomic():
        flow.save()
        versions.record(flow, by=by)
        record.store(flow, checked.compiled)
        flow_catalog_changed.send(sender=FlowConfig, action="update", flow=flow)
    logger.info("flow %s updated", flow)
    return FlowConfig.objects.get(pk=flow.pk)


def replace_secrets(flow: FlowConfig, properties: dict[str, Any]) -> FlowConfig:
    """Store the same secrets in another form (a master key rotation's
    re-wrapped key, a value bound to its owner): nothing the flow means
    changes, so only its secrets are checked again (the key and the values
    must still be its owner's), not the rest (a flow saved before a rule
    tightened must still follow its master key); it does not run (an
    unscheduled flow runs on each save) and it is recompiled, since its job
    specs carry the wrapped key."""
    flow.properties = properties
    validate_flow_secrets(flow)
    with transaction.atomic():
        flow.properties = properties
        flow.save(update_fields=["properties", "updated"])
        versions.record(flow, by="")  # the same meaning stored anew: the latest version stays the flow's spec
        record.compile_and_record(flow)
        flow_catalog_changed.send(sender=FlowConfig, action="secrets", flow=flow)
    logger.info("flow %s: secrets stored anew", flow)
    return FlowConfig.objects.get(pk=flow.pk)


def delete_flow(flow: FlowConfig) -> None:
    with transaction.atomic():
        flow_catalog_changed.send(sender=FlowConfig, action="delete", flow=flow)
        flow.delete()
    logger.info("flow %s deleted", flow)
