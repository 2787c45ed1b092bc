"""REST API of template packs: `/api/templatepacks/...` and the resolution
preview `/api/templates/resolve`. Thin: access and changes are in services."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api_errors import Conflict
from portal.api_parsers import BoundedJSONParser
from portal.templatepacks import services
from portal.templatepacks.models import JobTemplate, PackAuditEvent, TemplatePack
from portal.templatepacks.serializers import (
    AclSerializer,
    ArchiveSerializer,
    AuditEventSerializer,
    JobTemplateSerializer,
    PackCreateSerializer,
    PackVersionSerializer,
    ResolveRequestSerializer,
    ResolveResponseSerializer,
    TemplatePackSerializer,
    TemplateWriteSerializer,
)

UPLOAD_PARSERS = [MultiPartParser, FormParser, BoundedJSONParser]


def visible_pack(request, name: str) -> TemplatePack:
    """The pack, or 404 when it does not exist *or* the caller may not see it."""
    return get_object_or_404(
        TemplatePack.objects.restrict(request.user).select_related("current_version"), name=name
    )


class PackList(generics.ListAPIView):
    serializer_class = TemplatePackSerializer
    parser_classes = UPLOAD_PARSERS

    def get_queryset(self):
        return TemplatePack.objects.restrict(self.request.user).select_related(
            "created_by", "current_version"
        )

    @extend_schema(
        request=PackCreateSerializer, responses={201: TemplatePackSerializer, 409: OpenApiResponse()}
    )
    def post(self, request):
        data = PackCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            pack = services.create_pack(user=request.user, request=request, **data.validated_data)
        except services.PackExists as error:
            raise Conflict(str(error)) from None
        return Response(TemplatePackSerializer(pack, context={"request": request}).data, status=201)


class PackDetail(APIView):
    @extend_schema(responses=TemplatePackSerializer)
    def get(self, request, name: str):
        return Response(
            TemplatePackSerializer(visible_pack(request, name), context={"request": request}).data
        )

    @extend_schema(responses={204: None})
    def delete(self, request, name: str):
        services.delete_pack(visible_pack(request, name), user=request.user, request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PackTemplates(APIView):
    @extend_schema(responses=JobTemplateSerializer(many=True))
    def get(self, request, name: str):
        """Templates of the current version, or of `?version=N`."""
        pack = visible_pack(request, name)
        version = request.query_params.get("version")
        if version is not None:
            if not version.isdigit():
                raise ValidationError({"version": ["Must be a version number."]})
            templates = JobTemplate.objects.filter(version__pack=pack, version__number=int(version))
        else:
            templates = JobTemplate.objects.filter(version_id=pack.current_version_id)
        return Response(JobTemplateSerializer(templates.select_related("version"), many=True).data)

    @extend_schema(request=TemplateWriteSerializer, responses={201: PackVersionSerializer})
    def post(self, request, name: str):
        """Create or replace one template (a new version)."""
        pack = visible_pack(request, name)
        data = TemplateWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        if not data.validated_data.get("path"):
            raise ValidationError({"path": ["This field is required."]})
        version = services.save_template(pack, user=request.user, request=request, **data.validated_data)
        return Response(PackVersionSerializer(version).data, status=201)


class PackTemplate(APIView):
    @extend_schema(responses=JobTemplateSerializer)
    def get(self, request, name: str, template_path: str):
        pack = visible_pack(request, name)
        template = get_object_or_404(
            JobTemplate.objects.select_related("version"),
            version_id=pack.current_version_id,
            path=template_path,
        )
        return Response(JobTemplateSerializer(template).data)

    @extend_schema(request=TemplateWriteSerializer, responses=PackVersionSerializer)
    def put(self, request, name: str, template_path: str):
        pack = visible_pack(request, name)
        data = TemplateWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        version = services.save_template(
            pack, user=request.user, request=request, path=template_path, text=data.validated_data["text"]
        )
        return Response(PackVersionSerializer(version).data)

    @extend_schema(responses=PackVersionSerializer)
    def delete(self, request, name: str, template_path: str):
        pack = visible_pack(request, name)
        version = services.delete_template(pack, user=request.user, request=request, path=template_path)
        return Response(PackVersionSerializer(version).data)


class PackAclView(APIView):
    @extend_schema(responses=AclSerializer)
    def get(self, request, name: str):
        return Response(AclSerializer.for_pack(visible_pack(request, name)))

    @extend_schema(request=AclSerializer, responses=AclSerializer)
    def put(self, request, name: str):
        """Replace the ACL: owners edit the pack and its ACL, readers use it."""
        pack = visible_pack(request, name)
        data = AclSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        entries = [{k: v for k, v in e.items() if v} for e in data.validated_data["entries"]]
        services.set_acl(pack, user=request.user, entries=entries, request=request)
        return Response(AclSerializer.for_pack(pack))


class PackVersions(APIView):
    parser_classes = UPLOAD_PARSERS

    @extend_schema(responses=PackVersionSerializer(many=True))
    def get(self, request, name: str):
        pack = visible_pack(request, name)
        versions = pack.versions.select_related("created_by", "pack").prefetch_related("templates")
        return Response(PackVersionSerializer(versions, many=True).data)

    @extend_schema(request={"multipart/form-data": ArchiveSerializer}, responses={201: PackVersionSerializer})
    def post(self, request, name: str):
        """Upload an archive: the pack's templates become its contents (a new version)."""
        pack = visible_pack(request, name)
        data = ArchiveSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        version = services.upload_version(
            pack, user=request.user, request=request, upload=data.validated_data["archive"]
        )
        return Response(PackVersionSerializer(version).data, status=201)


class PackRollback(APIView):
    @extend_schema(request=None, responses={201: PackVersionSerializer})
    def post(self, request, name: str, number: int):
        pack = visible_pack(request, name)
        version = services.rollback(pack, user=request.user, request=request, number=number)
        return Response(PackVersionSerializer(version).data, status=201)


class PackHistory(generics.ListAPIView):
    serializer_class = AuditEventSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no pack
            return PackAuditEvent.objects.none()
        pack = visible_pack(self.request, self.kwargs["name"])
        return PackAuditEvent.objects.filter(pack_name=pack.name).select_related("actor", "on_behalf_of")


class ResolveTemplate(APIView):
    @extend_schema(request=ResolveRequestSerializer, responses=ResolveResponseSerializer)
    def post(self, request):
        """The job properties a flow with these properties would get from the
        template, or the required attributes it still lacks."""
        data = ResolveRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            result = services.preview(
                user=request.user,
                template_uri=data.validated_data["templateUri"],
                properties=data.validated_data["properties"],
            )
        except services.TemplateResolutionError as error:
            raise ValidationError({"templateUri": [error.message]}) from None
        return Response(
            {
                "complete": not result.missing_required,
                "properties": result.properties,
                "missingRequiredAttributes": result.missing_required,
                "pinnedVersions": result.pinned_versions,
            }
        )


_PACK = "templatepacks/<str:name>"
urlpatterns = [
    path("templatepacks", PackList.as_view(), name="templatepack-list"),
    path(_PACK, PackDetail.as_view(), name="templatepack-detail"),
    path(f"{_PACK}/templates", PackTemplates.as_view(), name="templatepack-templates"),
    path(f"{_PACK}/templates/<path:template_path>", PackTemplate.as_view(), name="templatepack-template"),
    path(f"{_PACK}/acl", PackAclView.as_view(), name="templatepack-acl"),
    path(f"{_PACK}/versions", PackVersions.as_view(), name="templatepack-versions"),
    path(f"{_PACK}/versions/<int:number>/rollback", PackRollback.as_view(), name="templatepack-rollback"),
    path(f"{_PACK}/history", PackHistory.as_view(), name="templatepack-history"),
    path("templates/resolve", ResolveTemplate.as_view(), name="template-resolve"),
]
