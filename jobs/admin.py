"""Jobs in the admin: read-only (a job changes through decisions and its steps, never by hand),
with its history inline; operators may cancel jobs."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from jobs.models import Job, JobDecision
from jobs.services import job_cancel


class JobDecisionInline(admin.TabularInline):
    model = JobDecision
    extra = 0
    can_delete = False
    fields = ("created", "user", "iteration", "checkpoint_kind", "action", "data", "note", "channel")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "tenant", "user", "state", "iteration", "checkpoint_kind", "created")
    list_filter = ("state", "kind", "tenant")
    search_fields = ("id", "user__username")
    inlines = (JobDecisionInline,)
    actions = ("cancel_jobs",)
    readonly_fields = [field.name for field in Job._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Cancel the selected jobs")
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        cancelled = 0
        for job in queryset.exclude(state__in=("complete", "failed", "cancelled")):
            job_cancel(tenant_id=job.tenant_id, user_id=job.user_id, job_id=job.pk)
            cancelled += 1
        self.message_user(request, f"Cancelled {cancelled} job(s).", messages.SUCCESS)
