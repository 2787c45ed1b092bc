"""Orchestration rows in the admin, for looking. Executions, jobs, actions,
the outbox and the state store change only through the orchestrator,
services and workers (which keep their invariants: status ranks, leases,
watermark history); the admin never edits them."""

from __future__ import annotations

from django.contrib import admin

from portal.orchestration.models import (
    Action,
    DatasetState,
    DatasetStateHistory,
    FlowExecution,
    JobExecution,
    OutboxMessage,
    ScheduleCursor,
    WorkerHeartbeat,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class JobExecutionInline(admin.TabularInline):
    model = JobExecution
    fields = ("job_name", "hop_index", "executor", "status", "attempt", "started_at", "ended_at", "message")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(FlowExecution)
class FlowExecutionAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "trigger", "status", "created", "started_at", "ended_at", "requested_by")
    list_filter = ("status", "trigger", "flow_group")
    search_fields = ("flow_group", "flow_name", "=execution_id", "message")
    date_hierarchy = "created"
    list_select_related = ("flow",)
    inlines = (JobExecutionInline,)


@admin.register(JobExecution)
class JobExecutionAdmin(ReadOnlyAdmin):
    list_display = ("job_name", "execution", "executor", "status", "attempt", "started_at", "ended_at")
    list_filter = ("status", "executor")
    search_fields = ("job_name", "execution__flow_group", "execution__flow_name", "=execution__execution_id")
    list_select_related = ("execution",)
    # The JobSpec may hold ENC(...) values; it is ciphertext, but there is no
    # reason to show it here.
    exclude = ("spec",)


@admin.register(Action)
class ActionAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "kind", "due_at", "claimed_by", "attempts", "done_at", "last_error")
    list_filter = ("kind", ("done_at", admin.EmptyFieldListFilter))
    search_fields = ("flow_group", "flow_name", "=execution_id", "job_name")


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "created", "sent_at", "attempts", "last_error")
    list_filter = (("sent_at", admin.EmptyFieldListFilter), "queue")
    # kwargs carry the JobSpec; kept out for the same reason as JobExecution.spec.
    exclude = ("kwargs",)


@admin.register(ScheduleCursor)
class ScheduleCursorAdmin(ReadOnlyAdmin):
    list_display = ("flow", "schedule", "last_tick", "updated")
    list_select_related = ("flow",)


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(ReadOnlyAdmin):
    list_display = ("worker", "running_jobs", "started", "last_seen")


class DatasetStateHistoryInline(admin.TabularInline):
    model = DatasetStateHistory
    fields = ("created", "execution_id", "previous_watermark", "watermark", "status", "records", "reason")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(DatasetState)
class DatasetStateAdmin(ReadOnlyAdmin):
    list_display = ("flow_group", "flow_name", "job_name", "dataset_urn", "last_status", "updated")
    list_filter = ("last_status", "flow_group")
    search_fields = ("flow_group", "flow_name", "job_name", "dataset_urn")
    inlines = (DatasetStateHistoryInline,)
