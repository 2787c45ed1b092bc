"""REST API of the keys app: `/api/keys` (the caller's wrapped customer
keys), `/api/keys/wrap` and `/api/keys/encrypt`. Thin: the work is in services."""

from __future__ import annotations

import logging

from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api_fields import StrictCharField
from portal.crypto import client
from portal.keys import services
from portal.keys.models import CustomerKey

logger = logging.getLogger(__name__)
NO_STORE = {"Cache-Control": "no-store"}


class MasterKeyUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The portal's master key is not available; an administrator must fix it (docs/keys.md)."
    default_code = "master_key_unavailable"


def master_key_unavailable(error: Exception) -> MasterKeyUnavailable:
    logger.error("master key unavailable: %s", error)
    return MasterKeyUnavailable()


class CustomerKeySerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    label = serializers.CharField(read_only=True)  # type: ignore[assignment]  # an API field; DRF's metaclass takes it off the class
    owner = serializers.CharField(
        source="owner_user.username", read_only=True, allow_null=True, help_text="Owning user, or null."
    )
    group = serializers.CharField(
        source="owner_group.name", read_only=True, allow_null=True, help_text="Owning group, or null."
    )
    fingerprint = serializers.CharField(
        source="short_fingerprint",
        read_only=True,
        help_text="Identifies the key without revealing it (`python -m portal.crypto.client fingerprint`).",
    )
    masterKeyId = serializers.CharField(source="master_key_id", read_only=True)
    binding = serializers.CharField(
        read_only=True,
        help_text="The owner its ENC(...) values are bound to (`python -m portal.crypto.client encrypt "
        "--owner <binding>`): they decrypt only in flows this owner owns.",
    )
    wrappedKey = serializers.CharField(
        source="wrapped_key",
        read_only=True,
        help_text="Put it in the flow property `encrypt.wrapped.key`; only this portal can unwrap it.",
    )
    created = serializers.DateTimeField(read_only=True)


class WrapRequestSerializer(serializers.Serializer):
    key = StrictCharField(
        required=False,
        max_length=128,
        write_only=True,
        help_text="Your AES-256 key, base64 (32 bytes). Never stored; only its wrapped form is.",
    )
    generate = serializers.BooleanField(
        required=False, default=False, help_text="Make a new random key instead; it is returned once."
    )
    label = StrictCharField(required=False, allow_blank=True, default="", max_length=128)  # type: ignore[assignment]  # an API field; DRF's metaclass takes it off the class
    group = StrictCharField(
        required=False, max_length=150, help_text="Store the key for this group (you must be a member)."
    )


class WrapResponseSerializer(CustomerKeySerializer):
    key = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text="The generated key, base64: shown in this response only, never stored. "
        "null when you sent your own key.",
    )


class EncryptRequestSerializer(serializers.Serializer):
    wrappedKey = StrictCharField(required=False, max_length=1024, help_text="A wrapped customer key.")
    keyId = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=2**63 - 1,
        help_text="Or the id of one of your stored keys (GET /api/keys).",
    )
    plaintext = StrictCharField(
        write_only=True,
        allow_blank=True,
        trim_whitespace=False,
        max_length=client.MAX_PLAINTEXT_BYTES,
        help_text=f"The secret; at most {client.MAX_PLAINTEXT_BYTES} bytes as UTF-8.",
    )

    def validate(self, attrs: dict) -> dict:
        if ("wrappedKey" in attrs) == ("keyId" in attrs):
            raise serializers.ValidationError({"wrappedKey": ["Give either wrappedKey or keyId."]})
        return attrs


class EncryptResponseSerializer(serializers.Serializer):
    value = serializers.CharField(help_text="ENC(...): use it as the property's value.")


class KeyList(generics.ListAPIView):
    """The caller's customer keys and their groups' (wrapped; no key is ever listed)."""

    serializer_class = CustomerKeySerializer

    def get_queryset(self):
        return CustomerKey.objects.usable_by(self.request.user).select_related("owner_user", "owner_group")


class WrapKey(APIView):
    @extend_schema(
        request=WrapRequestSerializer,
        responses={
            201: WrapResponseSerializer,
            400: OpenApiResponse(description="Bad key, label or group (field → messages)"),
            503: OpenApiResponse(description="The portal has no usable master key"),
        },
    )
    def post(self, request):
        """Wrap your key (or a new one) with the portal's master key and store
        the wrapped form for you (or your group)."""
        data = WrapRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            result = services.wrap_customer_key(user=request.user, **data.validated_data)
        except services.MasterKeyError as error:
            raise master_key_unavailable(error) from None
        body = {**WrapResponseSerializer(result.customer_key).data, "key": result.generated_key}
        return Response(body, status=status.HTTP_201_CREATED, headers=NO_STORE)


class EncryptValue(APIView):
    @extend_schema(
        request=EncryptRequestSerializer,
        responses={
            200: EncryptResponseSerializer,
            400: OpenApiResponse(description="Bad wrapped key, key id or plaintext (field → messages)"),
            503: OpenApiResponse(description="The portal has no usable master key"),
        },
    )
    def post(self, request):
        """A secret → its ENC(...) value under a customer key. Nothing is stored."""
        data = EncryptRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        field, wrapped = "wrappedKey", data.validated_data.get("wrappedKey")
        owner = None
        if wrapped is None:
            field = "keyId"
            record = (
                CustomerKey.objects.usable_by(request.user).filter(pk=data.validated_data["keyId"]).first()
            )
            if record is None:
                raise exceptions.ValidationError({field: ["You have no key with this id."]})
            wrapped, owner = record.wrapped_key, record.binding
        try:
            # Only a key's owner (or a member of its owning group) may mint ENC(...) values with
            # it, and each is bound to that owner: it decrypts only in flows the owner owns.
            owner = owner or services.binding_for(request.user, wrapped)
            value = services.encrypt_value(wrapped, data.validated_data["plaintext"], owner)
        except services.MasterKeyError as error:
            raise master_key_unavailable(error) from None
        except services.WrappedKeyError as error:
            raise exceptions.ValidationError({field: [f"The key {error}."]}) from None
        except services.EncryptionError as error:
            target = field if error.code == "not_key_owner" else "plaintext"
            raise exceptions.ValidationError({target: [str(error)]}) from None
        return Response({"value": value}, headers=NO_STORE)


urlpatterns = [
    path("keys", KeyList.as_view(), name="customerkey-list"),
    path("keys/wrap", WrapKey.as_view(), name="customerkey-wrap"),
    path("keys/encrypt", EncryptValue.as_view(), name="customerkey-encrypt"),
]
