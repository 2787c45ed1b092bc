"""REST API for the flow catalog: `/api/flowconfigs`, with GaaS's camelCase
names and its Rest.li key form `(flowGroup:g,flowName:n)`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Exists, OuterRef
from django.urls import path, re_path
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import exceptions, mixins, permissions, serializers, status, viewsets
from rest_framework.response import Response

if TYPE_CHECKING:  # a protocol of the DRF stubs only
    from rest_framework.decorators import ViewSetAction

from portal.accounts import access
from portal.api_errors import Conflict
from portal.api_fields import StrictCharField, StringMapField
from portal.flows import deletion, services
from portal.flows.compiler import scoped
from portal.flows.filters import FlowConfigFilterSet
from portal.flows.models import FlowConfig, FlowRefresh
from portal.flows.rules import flow_for
from portal.pipeline.destinations import write_modes

# API name → model field; errors from the model are reported under API names.
API_FIELDS = {
    "flowGroup": "flow_group",
    "flowName": "flow_name",
    "description": "description",
    "schedule": "schedule",
    "runImmediately": "run_immediately",
    "templateUris": "template_uris",
    "properties": "properties",
    "source": "source",
    "destinations": "destinations",
    "paused": "paused",
}
MODEL_TO_API = {model: api for api, model in API_FIELDS.items()}
RESTLI_PATCH = (
    "A Rest.li patch document is not read here: send it to /flowconfigsV2/(flowGroup:g,flowName:n) "
    '(Rest.li partial_update), or PATCH the fields themselves, e.g. {"schedule": "0 0/5 * * * ?"}.'
)


class CompilationSerializer(serializers.Serializer):
    status = serializers.CharField(source="compilation_status")
    message = serializers.CharField(source="compilation_message")
    # True while a topology change's background recompile of the flow is queued.
    refreshing = serializers.BooleanField(read_only=True, default=False)


class FlowConfigSerializer(serializers.Serializer):
    flowGroup = StrictCharField(source="flow_group", max_length=128, required=False)
    flowName = StrictCharField(source="flow_name", max_length=128, required=False)
    description = StrictCharField(allow_blank=True, required=False, default="")
    schedule = StrictCharField(
        allow_blank=True,
        required=False,
        default="",
        help_text="Unix cron (5 fields) or Quartz (6-7 fields, converted); empty = run once, as soon as "
        "it is saved (Gobblin's run-once flow; created with paused=true it waits for Run now).",
    )
    runImmediately = serializers.BooleanField(source="run_immediately", required=False, default=False)
    templateUris = StrictCharField(
        source="template_uris",
        allow_blank=True,
        required=False,
        default="",
        help_text="Comma-separated template URIs: pack://<pack>/<path>.template or FS:///<path>.template.",
    )
    templateNames = StrictCharField(
        write_only=True, required=False, help_text="Alias of templateUris used by GaaS's examples."
    )
    templateName = StrictCharField(write_only=True, required=False, help_text="Alias of templateUris.")
    properties = StringMapField(required=False, default=dict)
    source = StrictCharField(allow_blank=True, required=False, default="")  # type: ignore[assignment]  # an API field; DRF's metaclass takes it off the class
    destinations = serializers.ListField(child=StrictCharField(), required=False, default=list)
    owner = serializers.CharField(source="owner.username", read_only=True)
    created = serializers.DateTimeField(read_only=True)
    updated = serializers.DateTimeField(read_only=True)
    compilation = CompilationSerializer(source="*", read_only=True)
    # No default: a PUT or PATCH that leaves it out leaves the switch alone.
    paused = serializers.BooleanField(
        required=False,
        help_text="Airflow's on/off switch: a paused flow's schedule makes no executions; "
        "on resume the ticks missed meanwhile follow its flow.catchUpPolicy.",
    )
    pausedAt = serializers.DateTimeField(source="paused_at", read_only=True, allow_null=True)
    pausedBy = serializers.CharField(source="paused_by", read_only=True)
    # Stored as the properties they stand for (writer.write.mode, extract.primary.key.fields).
    writeMode = serializers.ChoiceField(
        choices=write_modes.MODES,
        write_only=True,
        required=False,
        help_text="How the destinations take a run's rows: append (default), overwrite (a full refresh "
        "replacing the dataset at once), merge (the latest row per primaryKey wins) or history (SCD "
        "type 2: valid_from/valid_to/is_current per key). Answers carry it too.",
    )
    primaryKey = serializers.ListField(
        child=StrictCharField(),
        write_only=True,
        required=False,
        help_text="The column(s) identifying a row; merge and history need them. Answers carry it too.",
    )

    writeModes = serializers.DictField(
        child=serializers.ChoiceField(choices=write_modes.MODES),
        write_only=True,
        required=False,
        help_text="A destination's own write mode over writeMode, by data node name, e.g. "
        '{"archive": "overwrite"}; stored as destination.<node>.writer.write.mode. Sent, it replaces '
        "the ones the flow had. Answers carry it too.",
    )

    def to_representation(self, instance):
        data = super().to_representation(instance)
        properties = getattr(instance, "properties", None) or {}
        data["writeMode"] = (properties.get(write_modes.KEY) or "append").lower()
        data["writeModes"] = destination_modes(properties)
        keys = properties.get(write_modes.PRIMARY_KEY) or ""
        data["primaryKey"] = [k.strip() for k in keys.split(",") if k.strip()]
        return data

    def _with_write_mode(self, attrs: dict) -> None:
        """writeMode and primaryKey put into the properties (sent, else the flow's own)."""
        mode, keys = attrs.pop("writeMode", None), attrs.pop("primaryKey", None)
        if mode is None and keys is None:
            return
        sent = attrs.get("properties")
        properties = dict(sent if sent is not None else getattr(self.instance, "properties", None) or {})
        given = {"writeMode": (write_modes.KEY, mode), "primaryKey": (write_modes.PRIMARY_KEY, keys)}
        for field, (key, value) in given.items():
            if value is None:
                continue
            text = ",".join(k.strip() for k in value if k.strip()) if isinstance(value, list) else value
            if sent is not None and sent.get(key) not in (None, text):
                raise serializers.ValidationError(
                    {field: [f"properties set {key} to '{sent[key]}' too; give one."]}
                )
            if text and text != "append":
                properties[key] = text
            else:
                properties.pop(key, None)
        if properties.get(write_modes.KEY) in write_modes.KEYED and not properties.get(
            write_modes.PRIMARY_KEY
        ):
            raise serializers.ValidationError(
                {
                    "primaryKey": [
                        f"writeMode {properties[write_modes.KEY]} needs the column(s) that identify a row."
                    ]
                }
            )
        attrs["properties"] = properties

    warnings = serializers.SerializerMethodField(
        help_text="Property keys that look misspelt (`source.file.fromat`), each with the closest "
        "known key. Not errors: the flow is saved as sent, custom keys are allowed."
    )

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_warnings(self, flow: FlowConfig) -> list[str]:
        return services.property_warnings(flow.properties or {})

    lastRunId = serializers.IntegerField(
        source="last_run_id",
        read_only=True,
        allow_null=True,
        help_text="The newest execution's flowExecutionId.",
    )
    lastRunStatus = serializers.CharField(
        source="last_run_status",
        read_only=True,
        help_text="The newest execution's executionStatus; empty when the flow never ran.",
    )

    def to_internal_value(self, data):
        """A field this API does not read is refused, never dropped: a Rest.li patch document
        (`{"patch": {"$set": …}}`) answered 200 here while changing nothing. Read-only fields
        (a GET's answer sent back) are known, and ignored as DRF ignores them."""
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {key: [RESTLI_PATCH if key == "patch" else "Unknown field."] for key in unknown}
                )
        return super().to_internal_value(data)

    def _with_destination_modes(self, attrs: dict) -> None:
        """writeModes put into the properties as destination.<node>.writer.write.mode, replacing the
        flow's; each names a destination of the flow, and a keyed mode needs the primary key."""
        modes = attrs.pop("writeModes", None)
        if modes is None:
            return
        sent = attrs.get("properties")
        properties = dict(sent if sent is not None else getattr(self.instance, "properties", None) or {})
        destinations = attrs.get("destinations") or list(getattr(self.instance, "destinations", None) or [])
        problems = [
            f"{node!r} is not a destination of the flow ({', '.join(destinations) or 'none'})."
            for node in modes
            if node not in destinations
        ]
        problems += [
            f"{mode} into {node} needs primaryKey: the column(s) that identify a row."
            for node, mode in modes.items()
            if mode in write_modes.KEYED and not properties.get(write_modes.PRIMARY_KEY)
        ]
        if problems:
            raise serializers.ValidationError({"writeModes": problems})
        for node in destination_modes(properties):
            properties.pop(scoped.scoped_key(write_modes.KEY, node), None)
        for node, mode in modes.items():
            properties[scoped.scoped_key(write_modes.KEY, node)] = mode
        attrs["properties"] = properties

    def validate(self, attrs: dict) -> dict:
        aliases = [attrs.pop("templateNames", None), attrs.pop("templateName", None)]
        alias = next((value for value in aliases if value), None)
        if alias and not attrs.get("template_uris"):
            attrs["template_uris"] = alias
        self._with_write_mode(attrs)
        self._with_destination_modes(attrs)
        if self.instance is None:
            missing = {
                api: ["This field is required."]
                for api, field in (("flowGroup", "flow_group"), ("flowName", "flow_name"))
                if not attrs.get(field)
            }
            if missing:
                raise serializers.ValidationError(missing)
        return attrs


def destination_modes(properties: dict[str, str]) -> dict[str, str]:
    """The flow's write modes per destination: node -> mode."""
    suffix = "." + write_modes.KEY
    return {
        key[len(scoped.PREFIX) : -len(suffix)]: str(value).lower()
        for key, value in properties.items()
        if key.startswith(scoped.PREFIX)
        and key.endswith(suffix)
        and len(key) > len(scoped.PREFIX) + len(suffix)
    }


def api_validation_error(error: DjangoValidationError) -> exceptions.ValidationError:
    if hasattr(error, "error_dict"):
        return exceptions.ValidationError(
            {MODEL_TO_API.get(field, field): messages for field, messages in error.message_dict.items()}
        )
    return exceptions.ValidationError({"non_field_errors": error.messages})


@extend_schema_view(
    create=extend_schema(
        responses={201: FlowConfigSerializer, 409: OpenApiResponse(description="Key exists")}
    ),
    destroy=extend_schema(
        parameters=[
            OpenApiParameter(
                deletion.CONFIRM_PARAMETER,
                bool,
                description="Delete even a flow that feeds other flows (their data trigger or their "
                "reads of its output): without it, such a flow answers 409 naming them.",
            )
        ],
        responses={
            204: OpenApiResponse(description="Deleted"),
            409: OpenApiResponse(
                description="The flow feeds other flows: detail, downstreamFlows (flowGroup, flowName, "
                "startsOnCommit, readsOutput), hiddenDownstreamFlows (a count of those you cannot see) "
                "and watermarkedDatasets (the dataset.urns whose watermarks go with it). Repeat with "
                "?confirm=true to delete."
            ),
        },
    ),
)
class FlowConfigViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = FlowConfigSerializer
    filterset_class = FlowConfigFilterSet
    lookup_url_kwarg = "flowName"

    def get_queryset(self):
        return (
            FlowConfig.objects.restrict(self.request.user)
            .select_related("owner")
            .annotate(refreshing=Exists(FlowRefresh.objects.filter(flow=OuterRef("pk"))))
        )

    def get_object(self) -> FlowConfig:
        action = access.VIEW if self.request.method in permissions.SAFE_METHODS else access.CHANGE
        return flow_for(
            self.request.user,
            self.kwargs["flowGroup"],
            self.kwargs["flowName"],
            action,
            queryset=self.get_queryset(),
        )

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            flow = services.create_flow(owner=request.user, data=serializer.validated_data)
        except DjangoValidationError as error:
            raise api_validation_error(error) from None
        except services.FlowAlreadyExists as error:
            raise Conflict(str(error)) from None
        return Response(self.get_serializer(flow).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, partial: bool = False, **kwargs):
        flow = self.get_object()
        serializer = self.get_serializer(flow, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        try:
            flow = services.update_flow(flow, data=serializer.validated_data, by=request.user.get_username())
        except DjangoValidationError as error:
            raise api_validation_error(error) from None
        except services.FlowKeyChange as error:
            raise exceptions.ValidationError({MODEL_TO_API[error.field]: [str(error)]}) from None
        return Response(self.get_serializer(flow).data)

    def partial_update(self, request, *args, **kwargs):
        return self.update(request, *args, partial=True, **kwargs)

    def destroy(self, request, *args, **kwargs):
        """A flow that feeds others (flows.deletion) is deleted only when asked with
        `?confirm=true`; without it, 409 naming them and the watermarks that go with it."""
        flow = self.get_object()
        confirmed = request.query_params.get(deletion.CONFIRM_PARAMETER, "").lower() in ("true", "1", "yes")
        if not confirmed:
            found = deletion.impact(flow, request.user)
            if found.feeds_others:
                return Response(
                    {
                        "detail": f"{found.sentence()} Delete it with ?{deletion.CONFIRM_PARAMETER}=true.",
                        **found.to_api(),
                    },
                    status=status.HTTP_409_CONFLICT,
                )
        services.delete_flow(flow)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(exclude=True)
class RestLiFlowConfigViewSet(FlowConfigViewSet):
    """GaaS's `/flowconfigs/(flowGroup:g,flowName:n)` form; same behaviour."""


DETAIL_ACTIONS: dict[str, str | ViewSetAction[Any]] = {
    "get": "retrieve",
    "put": "update",
    "patch": "partial_update",
    "delete": "destroy",
}
_KEY = r"[A-Za-z0-9_.-]{1,128}"

urlpatterns = [
    path("flowconfigs", FlowConfigViewSet.as_view({"get": "list", "post": "create"}), name="flowconfig-list"),
    path(
        "flowconfigs/<str:flowGroup>/<str:flowName>",
        FlowConfigViewSet.as_view(DETAIL_ACTIONS),
        name="flowconfig-detail",
    ),
    re_path(
        rf"^flowconfigs/\(flowGroup:(?P<flowGroup>{_KEY}),flowName:(?P<flowName>{_KEY})\)$",
        RestLiFlowConfigViewSet.as_view(DETAIL_ACTIONS),
    ),
    re_path(
        rf"^flowconfigs/\(flowName:(?P<flowName>{_KEY}),flowGroup:(?P<flowGroup>{_KEY})\)$",
        RestLiFlowConfigViewSet.as_view(DETAIL_ACTIONS),
    ),
]
