"""REST API of the monitoring app: `/api/subscriptions`, the caller's own
flow subscriptions (nobody sees or changes another user's). Thin: the rules
live in monitoring.subscriptions."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field, extend_schema_view
from rest_framework import exceptions, mixins, permissions, serializers, status, viewsets
from rest_framework.response import Response

from portal.api_errors import Conflict
from portal.api_fields import StrictCharField
from portal.monitoring import subscriptions
from portal.monitoring.models import Subscription

API_NAMES = {
    "on_failure": "onFailure",
    "on_sla_miss": "onSlaMiss",
    "on_recovery": "onRecovery",
    "on_success": "onSuccess",
    "by_email": "email",
    "webhook_url": "webhookUrl",
    "webhook_format": "webhookFormat",
    "flow": "flowName",
}


class DeliveryFailureSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    kind = serializers.CharField()
    error = serializers.CharField()
    attempt = serializers.IntegerField()
    retryAt = serializers.DateTimeField(allow_null=True, help_text="Empty: it was the last try.")


class DeliveryReportSerializer(serializers.Serializer):
    channel = serializers.CharField(help_text="email or webhook")
    lastDelivered = serializers.DateTimeField(allow_null=True)
    lastDeliveredKind = serializers.CharField()
    failure = DeliveryFailureSerializer(allow_null=True)


def _failure(attempt) -> dict | None:
    if attempt is None:
        return None
    return {
        "at": attempt.created,
        "kind": attempt.kind,
        "error": attempt.error,
        "attempt": attempt.attempt,
        "retryAt": attempt.retry_at,
    }


class SubscriptionSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    flowGroup = StrictCharField(source="flow.flow_group", max_length=128)
    flowName = StrictCharField(source="flow.flow_name", max_length=128)
    onFailure = serializers.BooleanField(source="on_failure", required=False, default=True)
    onSlaMiss = serializers.BooleanField(
        source="on_sla_miss",
        required=False,
        default=True,
        help_text="A job start or flow finish deadline missed.",
    )
    onRecovery = serializers.BooleanField(
        source="on_recovery",
        required=False,
        default=False,
        help_text="The flow's latest outcome turns good: a run, or a re-run job, commits after a failure.",
    )
    onSuccess = serializers.BooleanField(
        source="on_success",
        required=False,
        default=False,
        help_text="Every execution that commits (a recovery included).",
    )
    email = serializers.BooleanField(
        source="by_email", required=False, default=True, help_text="To your account's email address."
    )
    webhookUrl = StrictCharField(
        source="webhook_url",
        max_length=500,
        required=False,
        allow_blank=True,
        default="",
        help_text="http(s), public addresses only (the operator may open internal hosts, "
        "MONITORING_WEBHOOK_INTERNAL_HOSTS, and restrict hosts, MONITORING_WEBHOOK_ALLOWED_HOSTS). "
        "Answered as scheme and host only (the path may carry a token); sending that back keeps it.",
    )
    webhookFormat = serializers.ChoiceField(
        source="webhook_format",
        choices=Subscription.WebhookFormat.choices,
        required=False,
        default=Subscription.WebhookFormat.JSON,
        help_text='json: every field of the event; chat: {"text": ...}, which Slack, Mattermost and '
        "Microsoft Teams incoming webhooks accept.",
    )
    deliveries = serializers.SerializerMethodField(
        help_text="Per channel: the last delivery and, when the newest attempt failed, that failure."
    )
    created = serializers.DateTimeField(read_only=True)
    updated = serializers.DateTimeField(read_only=True)

    @extend_schema_field(DeliveryReportSerializer(many=True))
    def get_deliveries(self, subscription: Subscription) -> list[dict]:
        return [
            {
                "channel": row["channel"],
                "lastDelivered": row["delivered"].created if row["delivered"] else None,
                "lastDeliveredKind": row["delivered"].kind if row["delivered"] else "",
                "failure": _failure(row["failure"]),
            }
            for row in subscriptions.delivery_report(subscription)
        ]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["webhookUrl"] = subscriptions.masked_webhook(data["webhookUrl"])
        return data


def _api_error(error: DjangoValidationError) -> exceptions.ValidationError:
    return exceptions.ValidationError(
        {API_NAMES.get(field, field): messages for field, messages in error.message_dict.items()}
    )


FIELDS = subscriptions.CHOICES


@extend_schema_view(
    create=extend_schema(
        responses={
            201: SubscriptionSerializer,
            400: OpenApiResponse(description="Invalid, or a flow you may not read"),
            409: OpenApiResponse(description="Already subscribed to this flow"),
        }
    ),
)
class SubscriptionViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Your flow subscriptions: email and/or webhook on failure, SLA miss, recovery."""

    serializer_class = SubscriptionSerializer
    permission_classes = [permissions.IsAuthenticated]
    lookup_url_kwarg = "subscription_id"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no user
            return Subscription.objects.none()
        return subscriptions.subscriptions_of(self.request.user).order_by("pk")

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        flow = subscriptions.readable_flow(
            request.user, data["flow"]["flow_group"], data["flow"]["flow_name"]
        )
        if flow is None:
            raise exceptions.ValidationError({"flowName": ["No such flow that you may read."]})
        if subscriptions.subscription_of(request.user, flow) is not None:
            raise Conflict(f"You are already subscribed to {flow}; change that subscription instead.")
        subscription = Subscription(user=request.user, flow=flow, **{name: data[name] for name in FIELDS})
        try:
            subscriptions.save(subscription)
        except DjangoValidationError as error:
            raise _api_error(error) from error
        except IntegrityError as error:
            raise Conflict(f"You are already subscribed to {flow}.") from error
        return Response(self.get_serializer(subscription).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=SubscriptionSerializer, responses={200: SubscriptionSerializer, 400: None})
    def partial_update(self, request, *args, **kwargs):
        """Change what and how; the flow stays (subscribe to another flow instead)."""
        subscription = self.get_object()
        serializer = self.get_serializer(subscription, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if "flow" in data:
            raise exceptions.ValidationError({"flowName": ["A subscription's flow cannot change."]})
        if "webhook_url" in data:
            data["webhook_url"] = subscriptions.keep_or_replace(subscription.webhook_url, data["webhook_url"])
        for name in FIELDS:
            if name in data:
                setattr(subscription, name, data[name])
        try:
            subscriptions.save(subscription)
        except DjangoValidationError as error:
            raise _api_error(error) from error
        return Response(self.get_serializer(subscription).data)


_list = SubscriptionViewSet.as_view({"get": "list", "post": "create"})
_detail = SubscriptionViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"})

urlpatterns = [
    path("subscriptions", _list, name="subscription-list"),
    path("subscriptions/<int:subscription_id>", _detail, name="subscription-detail"),
]
