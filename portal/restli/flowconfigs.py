"""`/flowconfigs` (v1: create, get, update, delete) and `/flowconfigsV2`
(create returning the entity, get, update, partial_update, delete, get_all,
the `filterFlows` finder and the `runImmediately` action), as Gobblin's
FlowConfigClient and FlowConfigV2Client call them. Flows are created,
changed and deleted through flows.services, runs through
orchestration.services; nothing here stores anything itself.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import Q, TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.http import Http404, HttpResponse, JsonResponse
from rest_framework.request import Request

from portal.accounts import access
from portal.accounts.requests import api_user
from portal.flows import services as flow_services
from portal.flows.compiler import compile_flow
from portal.flows.models import DESTINATION_PROPERTY, SOURCE_PROPERTY, FlowConfig
from portal.flows.rules import flow_for
from portal.flows.schedules import to_unix_cron
from portal.flows.validators import NAME_PATTERN
from portal.orchestration import services as run_services
from portal.orchestration.models import FlowExecution
from portal.restli import protocol, records
from portal.restli.base import RestLiResource
from portal.restli.errors import RestLiError, ValidationFailure
from portal.restli.patch import apply_patch
from portal.templatepacks.services import validate_template_uris_for

CHANGE_DENIED = "Requester not allowed to make this request: only the flow's owner, its owning group and staff may change it."


# FlowConfig model fields → where the value sits in the FlowConfig record.
RECORD_PATHS = {
    "flow_group": "/id/flowGroup",
    "flow_name": "/id/flowName",
    "schedule": "/schedule/cronSchedule",
    "template_uris": "/templateUris",
    "properties": "/properties",
    "source": f"/properties/{SOURCE_PROPERTY}",
    "destinations": f"/properties/{DESTINATION_PROPERTY}",
}


def _refused(error: DjangoValidationError) -> RestLiError:
    """The catalog's own validation (beyond the record's schema), as a 400
    naming each field by its place in the record."""
    if hasattr(error, "error_dict"):
        lines = [
            f"{RECORD_PATHS.get(field, field)}: {' '.join(messages)}"
            for field, messages in error.message_dict.items()
        ]
    else:
        lines = list(error.messages)
    return RestLiError(400, "; ".join(lines))


# Gobblin's TemplateUriValidator (FlowConfig.pdl's templateUris): a comma-separated list of
# well-formed URIs of the FS scheme. Flowport's own pack:// scheme is a scheme it reads too.
TEMPLATE_URI_SCHEMES = ("fs", "pack")
_URI_SCHEME = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):")
_NOT_IN_URIS = re.compile(r'[\x00-\x20"<>\\^`{|}\x7f]')


def _template_uri_problems(body: Any) -> list[tuple[str, str]]:
    """The record's templateUris as its schema's validator judges it: a URI
    that is not well formed or names another scheme is a 422 (FILE://…,
    http://…); a well-formed one Flowport cannot read is the handler's 400."""
    if not isinstance(body, dict):
        return []
    name = next((n for n in ("templateUris", "templateNames", "templateName") if n in body), None)
    value = body.get(name) if name else None
    if not isinstance(value, str):
        return []  # absent or not a string: the record's own checks say so
    for uri in (part.strip() for part in value.split(",")):
        scheme = _URI_SCHEME.match(uri)
        if uri and (
            scheme is None or scheme["scheme"].lower() not in TEMPLATE_URI_SCHEMES or _NOT_IN_URIS.search(uri)
        ):
            return [(f"/{name}", f'"{value}" is not a well-formed comma-separated list of URIs')]
    return []


def _parse(body: Any) -> dict[str, Any]:
    """records.parse_flow_config, with the templateUris validator's verdict
    among the schema problems (one 422 lists them all)."""
    problems = _template_uri_problems(body)
    try:
        given = records.parse_flow_config(body)
    except ValidationFailure as failure:
        raise ValidationFailure([*failure.problems, *problems]) from None
    if problems:
        raise ValidationFailure(problems)
    return given


def _flow_key(resource: RestLiResource, text: str) -> tuple[str, str]:
    key = resource.key(text)
    try:
        return records.flow_id({k: v for k, v in key.items() if k != "$params"}, "key")
    except records.ValidationFailure as failure:
        raise RestLiError(400, f"Invalid key: {failure.message}") from None


def _visible(user, flow_group: str, flow_name: str) -> FlowConfig:
    return _allowed(user, flow_group, flow_name, access.VIEW)


def _changeable(user, flow_group: str, flow_name: str) -> FlowConfig:
    return _allowed(user, flow_group, flow_name, access.CHANGE)


def _allowed(user, flow_group: str, flow_name: str, action: str) -> FlowConfig:
    """The flows app's one lookup (:func:`portal.flows.rules.flow_for`), its answers in Rest.li's
    error envelope, as Gobblin's clients read them."""
    try:
        return flow_for(
            user,
            flow_group,
            flow_name,
            action,
            queryset=FlowConfig.objects.select_related("owner", "owning_group"),
        )
    except Http404:
        raise RestLiError(404, f"Flow requested does not exist: {flow_group}/{flow_name}") from None
    except PermissionDenied:
        raise RestLiError(403, CHANGE_DENIED) from None


def _refuse_execution_id(given: dict[str, Any]) -> None:
    if records.EXECUTION_ID_PROPERTY in given.get("properties", {}):
        raise RestLiError(400, f"{records.EXECUTION_ID_PROPERTY} cannot be set by the user")


def _run_once_defaults(given: dict[str, Any]) -> None:
    """A flow without a schedule runs once, at once (Gobblin's run-once flow)."""
    if not (given.get("schedule") or "").strip():
        given["schedule"] = ""
        given["runImmediately"] = True


def _key_text(flow_group: str, flow_name: str, execution_id: int | None) -> str:
    key: dict[str, Any] = {"flowGroup": flow_group, "flowName": flow_name}
    params: dict[str, Any] = {}
    if execution_id is not None:
        params = {**key, "flowExecutionId": execution_id}
    return protocol.encode({"$params": params, **key})


def _id_header(flow_group: str, flow_name: str) -> str:
    """`X-RestLi-Id`: Rest.li writes the key there without its params (encodeKeyForHeader);
    only `Location` carries them."""
    return protocol.encode_for_header({"flowGroup": flow_group, "flowName": flow_name})


class FlowConfigsResource(RestLiResource):
    """Gobblin's v1 `flowconfigs`: FlowId keys with empty params."""

    resource = "flowconfigs"

    # --- create -----------------------------------------------------------------------

    def restli_create(self, request: Request) -> HttpResponse:
        given = _parse(self.body())
        _refuse_execution_id(given)
        if given.get("explain"):
            return self.explain(request, given)
        _run_once_defaults(given)
        data = records.service_data(given, request.user)
        try:
            flow = flow_services.create_flow(owner=api_user(request), data=data)
        except DjangoValidationError as error:
            raise _refused(error) from None
        except flow_services.FlowAlreadyExists:
            raise RestLiError(
                409,
                f"FlowSpec with URI gobblin-flow:/{given['flowGroup']}/{given['flowName']} already exists, "
                "no action will be taken",
            ) from None
        return self.created(request, flow)

    def created(self, request: Request, flow: FlowConfig) -> HttpResponse:
        key = _key_text(flow.flow_group, flow.flow_name, None)
        response = HttpResponse(status=201)
        response["X-RestLi-Id"] = _id_header(flow.flow_group, flow.flow_name)
        response["Location"] = request.build_absolute_uri(f"/{self.resource}/{key}")
        return response

    def explain(self, request: Request, given: dict[str, Any]) -> HttpResponse:
        """v1 answers no entity, so it cannot return a plan (Gobblin's v1 refuses it too)."""
        raise RestLiError(400, "FlowConfig with explain not supported.")

    # --- one flow -----------------------------------------------------------------------

    def restli_get(self, request: Request, key: str) -> HttpResponse:
        flow = _visible(request.user, *_flow_key(self, key))
        return JsonResponse(records.flow_config_record(flow))

    def restli_update(self, request: Request, key: str) -> HttpResponse:
        flow_group, flow_name = _flow_key(self, key)
        flow = _changeable(request.user, flow_group, flow_name)
        given = _parse(self.body())
        self.replace(request, flow, given)
        return HttpResponse(status=200)

    def replace(self, request: Request, flow: FlowConfig, given: dict[str, Any]) -> FlowConfig:
        """Gobblin's update: the record replaces the flow's configuration,
        except that `flow.unschedule=true` only sets the never-run schedule."""
        if (given["flowGroup"], given["flowName"]) != (flow.flow_group, flow.flow_name):
            raise RestLiError(400, "flowName and flowGroup cannot be changed in update")
        _refuse_execution_id(given)
        if given["properties"].get(records.UNSCHEDULE_PROPERTY, "").lower() == "true":
            data = {
                "schedule": records.NEVER_RUN_SCHEDULE,
                "schedule_given": records.NEVER_RUN_SCHEDULE,
                "run_immediately": False,
            }
        else:
            _run_once_defaults(given)
            given.setdefault("owningGroup", None)  # absent from the record: no owning group
            data = records.service_data(given, request.user)
        try:
            return flow_services.update_flow(flow, data=data, by=request.user.get_username())
        except DjangoValidationError as error:
            raise _refused(error) from None

    def restli_delete(self, request: Request, key: str) -> HttpResponse:
        flow = _changeable(request.user, *_flow_key(self, key))
        flow_services.delete_flow(flow)
        return HttpResponse(status=200)


class FlowConfigsV2Resource(FlowConfigsResource):
    """Gobblin's `flowconfigsV2`: FlowId keys with FlowStatusId params."""

    resource = "flowconfigsV2"
    finders = ("filterFlows",)
    entity_actions = ("runImmediately",)

    def created(self, request: Request, flow: FlowConfig) -> HttpResponse:
        """201 with the entity; the key's params carry the flowExecutionId of
        a run-once flow (-1 for a scheduled one), which FlowConfigV2Client
        reads from the Location header."""
        execution_id = -1
        if not flow.schedule:
            latest = (
                FlowExecution.objects.filter(flow=flow, trigger=FlowExecution.Trigger.RUN_IMMEDIATELY)
                .order_by("-execution_id")
                .values_list("execution_id", flat=True)
                .first()
            )
            execution_id = latest if latest is not None else -1
        key = _key_text(flow.flow_group, flow.flow_name, execution_id)
        if self.query().get("$returnEntity", "true") == "false":
            response = HttpResponse(status=201)
        else:
            response = JsonResponse(records.flow_config_record(flow), status=201)
        response["X-RestLi-Id"] = _id_header(flow.flow_group, flow.flow_name)
        response["Location"] = request.build_absolute_uri(f"/{self.resource}/{key}")
        return response

    def explain(self, request: Request, given: dict[str, Any]) -> HttpResponse:
        """Compile and answer the plan in `gobblin.flow.compiled`; store nothing."""
        _run_once_defaults(given)
        data = records.service_data(given, request.user)
        flow = FlowConfig(owner=api_user(request), **data)
        try:
            flow.full_clean(validate_unique=False, validate_constraints=False)
            validate_template_uris_for(request.user, flow.template_uri_list)
        except DjangoValidationError as error:
            raise _refused(error) from None
        compiled = compile_flow(flow, user=request.user)
        record = records.flow_config_record(flow)
        record["explain"] = True
        record["properties"][records.COMPILED_PROPERTY] = json.dumps(compiled.to_dict(), sort_keys=True)
        response = JsonResponse(record, status=200)
        response["X-RestLi-Id"] = _id_header(flow.flow_group, flow.flow_name)
        return response

    def restli_partial_update(self, request: Request, key: str) -> HttpResponse:
        flow_group, flow_name = _flow_key(self, key)
        flow = _changeable(request.user, flow_group, flow_name)
        body = self.body()
        if not isinstance(body, dict) or not isinstance(body.get("patch"), dict):
            raise RestLiError(400, 'Failed to apply patch: the body must be {"patch": {...}}.')
        patch = body["patch"]
        # Gobblin checks the patch's own owningGroup before applying it.
        owning = patch.get("$set", {}).get("owningGroup") if isinstance(patch.get("$set"), dict) else None
        if owning is not None:
            records.owning_group_for(request.user, owning if isinstance(owning, str) else "")
        try:
            record = apply_patch(records.flow_config_record(flow), patch)
        except ValueError as error:
            raise RestLiError(400, f"Failed to apply patch: {error}") from None
        self.replace(request, flow, _parse(record))
        return HttpResponse(status=200)

    def action_runImmediately(self, request: Request, key: str) -> HttpResponse:
        flow_group, flow_name = _flow_key(self, key)
        flow = _changeable(request.user, flow_group, flow_name)
        with transaction.atomic():
            run_services.run_now(flow, user=request.user)
        return JsonResponse(
            {"value": f"Successfully triggered flow {{flowGroup={flow_group}, flowName={flow_name}}}"}
        )

    # --- collections ------------------------------------------------------------------

    def _page(self, queryset) -> HttpResponse:
        start, count = self.paging()
        rows = list(
            queryset.select_related("owning_group").order_by("flow_group", "flow_name")[
                start : start + count + 1
            ]
        )
        return self.collection(rows, start, count, records.flow_config_record)

    def restli_get_all(self, request: Request) -> HttpResponse:
        return self._page(FlowConfig.objects.restrict(request.user))

    def finder_filterFlows(self, request: Request, query: dict[str, Any]) -> HttpResponse:  # noqa: C901
        """Gobblin's FlowSpecSearchObject: every given parameter must match."""
        flows = FlowConfig.objects.restrict(request.user)
        for name in ("flowGroup", "flowName"):
            if name in query:
                value = str(query[name])
                if not _is_name(value):
                    return self.collection([], *self.paging(), records.flow_config_record)
                flows = flows.filter(**{"flow_group" if name == "flowGroup" else "flow_name": value})
        if "templateUri" in query:
            flows = flows.filter(template_uris__contains=str(query["templateUri"]))
        if "userToProxy" in query:
            # The key's JSON value against the string's (properties hold strings): SQLite compares
            # a key's text with a JSON document, which a bare string is not.
            flows = flows.filter(**{"properties__user.to.proxy": str(query["userToProxy"])})
        if "sourceIdentifier" in query:
            flows = flows.filter(source=str(query["sourceIdentifier"]))
        if "destinationIdentifier" in query:
            # Node names are [A-Za-z0-9_.-]: the quoted name in the list's text is exact.
            flows = flows.annotate(_destinations=Cast("destinations", TextField())).filter(
                _destinations__contains=json.dumps(str(query["destinationIdentifier"]))
            )
        if "schedule" in query:
            schedule = " ".join(str(query["schedule"]).split())
            try:
                stored = to_unix_cron(schedule)
            except DjangoValidationError:
                stored = schedule
            flows = flows.filter(Q(schedule_given=schedule) | Q(schedule=stored))
        if "isRunImmediately" in query:
            flows = flows.filter(run_immediately=str(query["isRunImmediately"]).lower() == "true")
        if "owningGroup" in query:
            flows = flows.filter(owning_group__name=str(query["owningGroup"]))
        if "propertyFilter" in query:
            conditions = [c.strip() for c in str(query["propertyFilter"]).split(",") if c.strip()]
            for index, condition in enumerate(conditions):
                name, equals, value = condition.partition("=")
                if not equals:
                    flows = flows.filter(properties__has_key=name)
                elif "=" not in value:  # Gobblin ignores a condition with several '='
                    alias = f"_property{index}"
                    flows = flows.annotate(**{alias: KeyTextTransform(name, "properties")}).filter(
                        **{f"{alias}__contains": value}
                    )
        return self._page(flows)


def _is_name(value: str) -> bool:
    return bool(re.fullmatch(NAME_PATTERN, value))
