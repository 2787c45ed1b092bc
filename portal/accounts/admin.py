from django.contrib import admin

from portal.accounts.models import ApiToken, ProxyAuditEvent


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "prefix", "created", "expires_at", "last_used", "revoked_at")
    search_fields = ("name", "user__username", "prefix")
    readonly_fields = ("user", "prefix", "created", "last_used")
    exclude = ("key_hash",)

    def has_add_permission(self, request) -> bool:
        return False  # tokens are made on the profile page, where the key is shown once


@admin.register(ProxyAuditEvent)
class ProxyAuditEventAdmin(admin.ModelAdmin):
    list_display = ("at", "actor", "acting_as", "method", "path")
    list_filter = ("method",)
    search_fields = ("actor__username", "acting_as__username", "path")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
