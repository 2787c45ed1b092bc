from django.contrib import admin

from portal.flows.models import FlowConfig, FlowGroup


@admin.register(FlowConfig)
class FlowConfigAdmin(admin.ModelAdmin):
    list_display = ("flow_group", "flow_name", "owner", "schedule", "compilation_status", "updated")
    list_filter = ("compilation_status", "flow_group")
    search_fields = ("flow_group", "flow_name", "description")
    readonly_fields = ("created", "updated", "compilation_status", "compilation_message")

    # Flows change only through flows.services so catalog listeners (scheduler,
    # compiler) always hear about it; the admin is for looking.
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(FlowGroup)
class FlowGroupAdmin(admin.ModelAdmin):
    """Staff hand a flow group to a team (its owning group) or another user here."""

    list_display = ("name", "owner_user", "owner_group", "created")
    search_fields = ("name",)
    autocomplete_fields = ()
