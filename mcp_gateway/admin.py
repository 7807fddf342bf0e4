from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from mcp_gateway.models import McpSession, TerminationReason
from mcp_gateway.sessions import session_terminate


@admin.register(McpSession)
class McpSessionAdmin(admin.ModelAdmin):
    list_display = [
        "short_id",
        "user",
        "tenant",
        "application",
        "client_name",
        "protocol_version",
        "created",
        "last_seen",
        "terminated_at",
        "termination_reason",
    ]
    list_filter = ["tenant", "termination_reason", "protocol_version"]
    search_fields = ["id", "user__username", "client_name"]
    readonly_fields = [field.name for field in McpSession._meta.fields]
    actions = ["terminate"]

    @admin.display(description="Session")
    def short_id(self, session: McpSession) -> str:
        return f"{session.id[:12]}…"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Terminate the selected sessions")
    def terminate(self, request: HttpRequest, queryset: QuerySet[McpSession]) -> None:
        live = list(queryset.filter(terminated_at__isnull=True))
        for session in live:
            session_terminate(session_id=session.pk, reason=TerminationReason.OPERATOR)
        self.message_user(request, f"Terminated {len(live)} session(s).", messages.SUCCESS)
