"""The quotas as a REST resource: staff read and set them (`/api/quotas`)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework import permissions, serializers, viewsets
from rest_framework.routers import SimpleRouter

from portal.quotas.forms import LIMITS, clean_target
from portal.quotas.models import Quota
from portal.topology.models import SpecExecutor


class QuotaSerializer(serializers.ModelSerializer):
    user = serializers.SlugRelatedField(
        slug_field="username", queryset=get_user_model().objects.all(), required=False, allow_null=True
    )
    group = serializers.SlugRelatedField(
        slug_field="name", queryset=Group.objects.all(), required=False, allow_null=True
    )
    executor = serializers.SlugRelatedField(
        slug_field="name", queryset=SpecExecutor.objects.all(), required=False, allow_null=True
    )

    class Meta:
        model = Quota
        fields = ("id", "scope", "user", "group", "executor", *LIMITS, "updated", "updated_by")
        read_only_fields = ("updated", "updated_by")
        validators: list = []  # the one-per-target constraints answer below, naming the field

    def validate(self, attrs: dict) -> dict:
        merged = {
            field: getattr(self.instance, field, None) for field in ("scope", "user", "group", "executor")
        }
        merged.update(attrs)
        try:
            cleaned = clean_target(merged)
        except Exception as error:  # a Django ValidationError naming the field
            raise serializers.ValidationError(getattr(error, "message_dict", str(error))) from None
        taken = Quota.objects.all()
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        scope = cleaned["scope"]
        target = {"DEFAULT": {"scope": "DEFAULT"}}.get(scope) or {
            field: cleaned[field] for field in ("user", "group", "executor") if cleaned[field] is not None
        }
        if taken.filter(**target).exists():
            raise serializers.ValidationError({next(iter(target)): "already has a quota; change that one."})
        attrs.update({field: cleaned[field] for field in ("user", "group", "executor")})
        return attrs

    def save(self, **kwargs):
        request = self.context.get("request")
        return super().save(updated_by=getattr(getattr(request, "user", None), "username", ""), **kwargs)


class QuotaViewSet(viewsets.ModelViewSet):
    """Quotas per user, group and executor, and the default every user has."""

    queryset = Quota.objects.select_related("user", "group", "executor").order_by("scope", "id")
    serializer_class = QuotaSerializer
    permission_classes = [permissions.IsAdminUser]


router = SimpleRouter(trailing_slash=False)
router.register("quotas", QuotaViewSet, basename="quota")
urlpatterns = router.urls
