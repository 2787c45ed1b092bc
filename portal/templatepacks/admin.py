"""Admin: packs browsable; versions, templates and audit rows read-only."""

from __future__ import annotations

from django.contrib import admin

from portal.templatepacks.models import JobTemplate, PackAcl, PackAuditEvent, PackVersion, TemplatePack


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class AclInline(admin.TabularInline):
    model = PackAcl
    extra = 0

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # ACL changes go through the pack page or API, which audit them

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(TemplatePack)
class TemplatePackAdmin(ReadOnlyAdmin):
    list_display = ("name", "current_version", "created_by", "created")
    search_fields = ("name", "description")
    inlines = [AclInline]


@admin.register(PackVersion)
class PackVersionAdmin(ReadOnlyAdmin):
    list_display = ("pack", "number", "kind", "created_by", "created")
    list_filter = ("kind",)


@admin.register(JobTemplate)
class JobTemplateAdmin(ReadOnlyAdmin):
    list_display = ("path", "version")
    search_fields = ("path",)


@admin.register(PackAuditEvent)
class PackAuditEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "pack_name", "action", "actor", "on_behalf_of", "version_number", "summary")
    list_filter = ("action",)
    search_fields = ("pack_name", "actor__username", "summary")
