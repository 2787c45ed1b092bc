"""Admin: the folders administrators open to users and groups for the data nodes they make
(the rest of the policy is in the settings, topology.policy); user-made nodes' audit trail
read-only. Nodes, executors and grants change through the topology pages and API, which
validate, move the revision and audit."""

from __future__ import annotations

from django.contrib import admin

from portal.topology.models import DataNodeAuditEvent, DestinationTable, NodeArea


@admin.register(NodeArea)
class NodeAreaAdmin(admin.ModelAdmin):
    list_display = ("path", "user", "group", "description")
    search_fields = ("path", "user__username", "group__name")
    autocomplete_fields = ("user", "group")


@admin.register(DataNodeAuditEvent)
class DataNodeAuditEventAdmin(admin.ModelAdmin):
    list_display = ("at", "node_name", "action", "actor", "on_behalf_of", "summary")
    list_filter = ("action",)
    search_fields = ("node_name", "summary")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(DestinationTable)
class DestinationTableAdmin(admin.ModelAdmin):
    """Staff see whose each table of a shared destination is and assign it (portal.topology.tables):
    an empty owner gives it back to the node's owners."""

    list_display = ("node", "name", "owner", "flow", "created")
    list_filter = ("node",)
    search_fields = ("name", "node__name", "owner__username", "flow")
    autocomplete_fields = ("owner",)
    readonly_fields = ("flow", "created")
