"""DRF serializers of template packs (camelCase, like the rest of the API)."""

from __future__ import annotations

from django.contrib.auth.models import User
from rest_framework import serializers

from portal.accounts import access
from portal.api_fields import StrictCharField, StringMapField
from portal.templatepacks.acl import acl_entries
from portal.templatepacks.models import JobTemplate, PackAuditEvent, PackVersion, TemplatePack


class TemplatePackSerializer(serializers.ModelSerializer):
    createdBy: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        source="created_by", slug_field="username", read_only=True
    )
    currentVersion = serializers.IntegerField(
        source="current_version.number", read_only=True, allow_null=True
    )
    canEdit = serializers.SerializerMethodField()

    class Meta:
        model = TemplatePack
        fields = ["name", "description", "created", "createdBy", "currentVersion", "canEdit"]

    def get_canEdit(self, pack: TemplatePack) -> bool:
        return access.can(self.context["request"].user, access.CHANGE, pack)


class PackCreateSerializer(serializers.Serializer):
    name = StrictCharField(max_length=128)
    description = StrictCharField(required=False, allow_blank=True, default="")
    archive = serializers.FileField(required=False, help_text=".zip or .tar.gz of .template files")


class ArchiveSerializer(serializers.Serializer):
    archive = serializers.FileField(help_text=".zip or .tar.gz of .template files")


class JobTemplateSerializer(serializers.ModelSerializer):
    version = serializers.IntegerField(source="version.number", read_only=True)

    class Meta:
        model = JobTemplate
        fields = ["path", "text", "version"]


class TemplateWriteSerializer(serializers.Serializer):
    path = StrictCharField(max_length=500, required=False)
    text = StrictCharField(trim_whitespace=False, allow_blank=True)


class PackVersionSerializer(serializers.ModelSerializer):
    createdBy: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        source="created_by", slug_field="username", read_only=True
    )
    current = serializers.SerializerMethodField()
    templates: serializers.SlugRelatedField[JobTemplate] = serializers.SlugRelatedField(
        many=True, slug_field="path", read_only=True
    )

    class Meta:
        model = PackVersion
        fields = ["number", "kind", "message", "created", "createdBy", "current", "templates"]

    def get_current(self, version: PackVersion) -> bool:
        return version.pack.current_version_id == version.pk


class AclEntrySerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=["owner", "reader"])
    user = StrictCharField(required=False)
    group = StrictCharField(required=False)


class AclSerializer(serializers.Serializer):
    entries = AclEntrySerializer(many=True)

    @staticmethod
    def for_pack(pack: TemplatePack) -> dict:
        return {"entries": acl_entries(pack)}


class AuditEventSerializer(serializers.ModelSerializer):
    actor: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    onBehalfOf: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        source="on_behalf_of", slug_field="username", read_only=True
    )
    pack = serializers.CharField(source="pack_name")
    version = serializers.IntegerField(source="version_number", allow_null=True)

    class Meta:
        model = PackAuditEvent
        fields = ["at", "pack", "action", "actor", "onBehalfOf", "version", "summary", "diff"]


class ResolveRequestSerializer(serializers.Serializer):
    templateUri = StrictCharField(max_length=2000)
    properties = StringMapField(required=False, default=dict)


class ResolveResponseSerializer(serializers.Serializer):
    complete = serializers.BooleanField(help_text="False when required attributes are missing.")
    properties = serializers.DictField(child=serializers.CharField())
    missingRequiredAttributes = serializers.ListField(child=serializers.CharField())
    pinnedVersions = serializers.DictField(child=serializers.IntegerField())
