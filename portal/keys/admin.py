"""Admin: customer keys are listed read-only (made only through the wrap
endpoint, re-wrapped only by `manage.py rotate_master_key`); staff may delete one."""

from __future__ import annotations

from django.contrib import admin

from portal.keys.models import CustomerKey


@admin.register(CustomerKey)
class CustomerKeyAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "label",
        "owner_user",
        "owner_group",
        "short_fingerprint",
        "master_key_id",
        "created",
    )
    list_filter = ("master_key_id",)
    search_fields = ("label", "owner_user__username", "owner_group__name", "fingerprint")
    readonly_fields = [field.name for field in CustomerKey._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
